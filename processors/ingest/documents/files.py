"""Reading documents from files: JSONL (one document per line); text and markdown files; PDF (its
text layer), DOCX, PPTX and HTML files (formats/: with the page, slide or heading of each part);
and directories of them (id = path under the directory; title = the title the file gives itself —
a markdown file's first `# ` heading, a PDF's or office file's title property, a page's <title> —
else the file name). A file or line that cannot be read is reported with the reason and skipped;
the other documents are read. Every file is bounded by size before it is read."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from pydantic import ValidationError

from processors.ingest.documents.formats import MAX_FILE_BYTES, UnreadableFile, extract
from schemas.documents import Document

DocumentFormat = Literal["auto", "jsonl", "txt", "md", "pdf", "docx", "pptx", "html"]
DOCUMENT_FORMATS: tuple[str, ...] = get_args(DocumentFormat)
TEXT_SUFFIXES = {".txt", ".md", ".markdown", ".text"}
FILE_SUFFIXES = TEXT_SUFFIXES | {".pdf", ".docx", ".pptx", ".html", ".htm", ".xhtml"}
READ = "kgflow reads .jsonl, .txt, .md, .pdf, .docx, .pptx and .html files"


@dataclass(frozen=True)
class Unreadable:
    """A document (or line) that could not be read, and where."""

    where: str
    error: str


def _problem(e: ValidationError) -> str:
    err = e.errors()[0]
    return f"{'.'.join(str(x) for x in err['loc']) or 'document'}: {err['msg']}"


def _jsonl(path: Path) -> Iterator[Document | Unreadable]:
    with path.open(encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield Document.model_validate_json(line)
            except ValidationError as e:
                yield Unreadable(f"{path}:{n}", _problem(e))


def _bytes(path: Path) -> bytes:
    """The file's bytes, refused before reading when it is not a regular file or too big."""
    if not path.is_file():
        raise UnreadableFile("not a regular file")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise UnreadableFile(f"{size:,} bytes, over the limit of {MAX_FILE_BYTES:,} for one document")
    return path.read_bytes()


def _file(path: Path, root: Path, fmt: DocumentFormat) -> Document | Unreadable:
    doc_id = path.name if path == root else str(path.relative_to(root))
    markdown = fmt == "md" or (fmt == "auto" and path.suffix.lower() in (".md", ".markdown"))
    try:
        data = _bytes(path)
        if fmt in ("txt", "md") or (fmt == "auto" and path.suffix.lower() in TEXT_SUFFIXES):
            text = data.decode("utf-8")
            first = text.lstrip().split("\n", 1)[0]
            title = first[2:].strip() if markdown and first.startswith("# ") else ""
            return Document(id=doc_id, title=title or path.name, text=text)
        found = extract(data, path.name, "text/html" if fmt == "html" else "")
        return Document(id=doc_id, title=found.title or path.name, text=found.text, sections=found.sections)
    except UnicodeDecodeError as e:
        return Unreadable(str(path), f"not UTF-8 text ({e.reason} at byte {e.start})")
    except (OSError, UnreadableFile) as e:
        return Unreadable(str(path), str(e))
    except ValidationError as e:
        return Unreadable(str(path), _problem(e))


def read_documents(paths: list[Path], fmt: DocumentFormat = "auto") -> Iterator[Document | Unreadable]:
    """Documents of every path, in order; missing paths raise FileNotFoundError up front."""
    for p in paths:
        if not p.exists():
            raise FileNotFoundError(f"no such file or directory: {p}")
    for p in paths:
        if p.is_dir():
            wanted = {".jsonl"} if fmt == "jsonl" else FILE_SUFFIXES | ({".jsonl"} if fmt == "auto" else set())
            files = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in wanted)
            if not files:
                yield Unreadable(str(p), f"no documents in the directory ({READ})")
            for f in files:
                yield from (_jsonl(f) if f.suffix.lower() == ".jsonl" else [_file(f, p, fmt)])
        elif fmt == "jsonl" or (fmt == "auto" and p.suffix.lower() == ".jsonl"):
            yield from _jsonl(p)
        else:
            yield _file(p, p, fmt)
