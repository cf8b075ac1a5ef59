"""Reading documents from files: JSONL (one document per line); text and markdown files; PDF (its
text layer), DOCX, PPTX and HTML files (formats/: with the page, slide or heading of each part);
and directories of them (id = path under the directory; title = the title the file gives itself —
a markdown file's first `# ` heading, a PDF's or office file's title property, a page's <title> —
cut to the title limit, else the file name). Every file is bounded before it is read: only regular
files, up to the operator's KGFLOW_MAX_FILE_MB (FileLimits), JSONL lines read a bounded piece at a
time. A file longer than one document holds (a book) is read as parts `ID#1`, `ID#2`, ... cut at a
page or heading, each citing its own pages. A file or line that cannot be a document (too big, not
UTF-8, unreadable, no text, invalid, an id read before in the same load) is reported by name with
the reason and skipped; the other documents are read."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal, get_args

from pydantic import ValidationError

from processors.base.settings import from_env
from processors.ingest.documents.formats import Extracted, FileLimits, UnreadableFile, extract, part_ids, parts
from processors.ingest.documents.formats.markdown import extract_markdown
from schemas.documents import MAX_DOCUMENT_CHARS, MAX_TITLE_CHARS, Document

DocumentFormat = Literal["auto", "jsonl", "txt", "md", "pdf", "docx", "pptx", "html"]
DOCUMENT_FORMATS: tuple[str, ...] = get_args(DocumentFormat)
TEXT_SUFFIXES = {".txt", ".md", ".markdown", ".text"}
FILE_SUFFIXES = TEXT_SUFFIXES | {".pdf", ".docx", ".pptx", ".html", ".htm", ".xhtml"}
READ = "kgflow reads .jsonl, .txt, .md, .pdf, .docx, .pptx and .html files"
MAX_LINE_BYTES = 8 * MAX_DOCUMENT_CHARS  # a JSONL line: the text JSON-escaped (`\uXXXX`) and its fields
SKIP_BLOCK = 1 << 20


@dataclass(frozen=True)
class Unreadable:
    """A document (or line) that could not be read, and where."""

    where: str
    error: str


def _invalid(e: ValidationError) -> str:
    err = e.errors()[0]
    return f"{'.'.join(str(x) for x in err['loc']) or 'document'}: {err['msg']}"


def _not_utf8(data: bytes, e: UnicodeDecodeError) -> str:
    return f"not UTF-8 text (byte {data[e.start]:#04x} at offset {e.start})"


def _skip_line(f: BinaryIO) -> None:
    """Read past the rest of an over-long line, a block at a time."""
    while (block := f.readline(SKIP_BLOCK)) and not block.endswith(b"\n"):
        pass


def _jsonl(path: Path) -> Iterator[tuple[str, Document | Unreadable]]:
    with path.open("rb") as f:
        n = 0
        while line := f.readline(MAX_LINE_BYTES + 1):
            n += 1
            where = f"{path}:{n}"
            if len(line) > MAX_LINE_BYTES:
                _skip_line(f)
                yield where, Unreadable(where, f"line over {MAX_LINE_BYTES:,} bytes: a document holds at most "
                                               f"{MAX_DOCUMENT_CHARS:,} characters")  # fmt: skip
                continue
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError as e:
                yield where, Unreadable(where, _not_utf8(line, e))
                continue
            if not text.strip():
                continue
            try:
                yield where, Document.model_validate_json(text)
            except ValidationError as e:
                yield where, Unreadable(where, _invalid(e))


def _bytes(path: Path, limits: FileLimits) -> bytes:
    """The file's bytes, refused before reading when it is not a regular file or too big."""
    if not path.is_file():  # a device (/dev/zero), pipe or socket: no size to bound it by
        raise UnreadableFile("not a regular file or directory")
    size = path.stat().st_size
    if size > limits.max_bytes:
        raise UnreadableFile(limits.refusal(size))
    return path.read_bytes()


def _file(path: Path, root: Path, fmt: DocumentFormat, limits: FileLimits) -> list[Document] | Unreadable:
    """The file as one document, or a book as parts `ID#1`, `ID#2`... each citing its own pages."""
    doc_id = path.name if path == root else str(path.relative_to(root))
    text_file = fmt in ("txt", "md") or (fmt == "auto" and path.suffix.lower() in TEXT_SUFFIXES)
    markdown = fmt == "md" or (fmt == "auto" and path.suffix.lower() in (".md", ".markdown"))
    data = b""
    try:
        data = _bytes(path, limits)
        if text_file:
            text = data.decode("utf-8")
            found = extract_markdown(text) if markdown else Extracted(text, [])
        else:
            found = extract(data, path.name, "text/html" if fmt == "html" else "", limit=limits.max_bytes)
        data = b""  # a book's bytes are not kept beside its text
        if not found.text.strip():
            return Unreadable(str(path), "no text in it (an empty file)")
        title = found.title[:MAX_TITLE_CHARS] or path.name
        pieces = parts(found)
        ids = part_ids(doc_id, len(pieces))
        return [Document(id=i, title=title, text=p.text, sections=p.sections) for i, p in zip(ids, pieces, strict=True)]
    except UnicodeDecodeError as e:
        return Unreadable(str(path), _not_utf8(data, e))
    except (OSError, UnreadableFile) as e:
        return Unreadable(str(path), str(e))
    except ValidationError as e:
        return Unreadable(str(path), _invalid(e))


def _read(paths: list[Path], fmt: DocumentFormat) -> Iterator[tuple[str, Document | Unreadable]]:
    limits = from_env(FileLimits)
    for p in paths:
        if p.is_dir():
            wanted = {".jsonl"} if fmt == "jsonl" else FILE_SUFFIXES | ({".jsonl"} if fmt == "auto" else set())
            files = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in wanted)
            if not files:
                yield str(p), Unreadable(str(p), f"no documents in the directory ({READ})")
            for f in files:
                yield from _jsonl(f) if f.suffix.lower() == ".jsonl" else _each(str(f), _file(f, p, fmt, limits))
        elif p.is_file() and (fmt == "jsonl" or (fmt == "auto" and p.suffix.lower() == ".jsonl")):
            yield from _jsonl(p)
        else:
            yield from _each(str(p), _file(p, p, fmt, limits))


def _each(where: str, found: list[Document] | Unreadable) -> Iterator[tuple[str, Document | Unreadable]]:
    yield from ((where, d) for d in found) if isinstance(found, list) else [(where, found)]


def read_documents(paths: list[Path], fmt: DocumentFormat = "auto") -> Iterator[Document | Unreadable]:
    """Documents of every path, in order; missing paths raise FileNotFoundError up front. A
    document whose id was read before in this load is reported and skipped (the first is kept)."""
    for p in paths:
        if not p.exists():
            raise FileNotFoundError(f"no such file or directory: {p}")
    first: dict[str, str] = {}
    for where, item in _read(paths, fmt):
        if isinstance(item, Document) and first.setdefault(item.id, where) != where:
            item = Unreadable(where, f"duplicate document id {item.id!r} (first read from {first[item.id]})")
        yield item
