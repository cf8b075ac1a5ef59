"""Reading documents from files: JSONL (one document per line), or text/markdown files and
directories of them (id = path under the directory; title = a markdown file's first `# `
heading, else the file name). A bad line is reported with file:line and skipped; the other
documents are read."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from schemas.documents import Document

DocumentFormat = Literal["auto", "jsonl", "txt", "md"]
TEXT_SUFFIXES = {".txt", ".md", ".markdown", ".text"}


@dataclass(frozen=True)
class Unreadable:
    """A document (or line) that could not be read, and where."""

    where: str
    error: str


def _jsonl(path: Path) -> Iterator[Document | Unreadable]:
    with path.open(encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield Document.model_validate_json(line)
            except ValidationError as e:
                err = e.errors()[0]
                loc = ".".join(str(x) for x in err["loc"]) or "line"
                yield Unreadable(f"{path}:{n}", f"{loc}: {err['msg']}")


def _text(path: Path, root: Path) -> Document | Unreadable:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return Unreadable(str(path), str(e))
    doc_id = path.name if path == root else str(path.relative_to(root))
    first = text.lstrip().split("\n", 1)[0]
    title = first[2:].strip() if path.suffix.lower() in (".md", ".markdown") and first.startswith("# ") else ""
    return Document(id=doc_id, title=title or path.name, text=text)


def read_documents(paths: list[Path], fmt: DocumentFormat = "auto") -> Iterator[Document | Unreadable]:
    """Documents of every path, in order; missing paths raise FileNotFoundError up front."""
    for p in paths:
        if not p.exists():
            raise FileNotFoundError(f"no such file or directory: {p}")
    for p in paths:
        if p.is_dir():
            files = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in TEXT_SUFFIXES)
            if fmt == "jsonl":
                files = sorted(p.rglob("*.jsonl"))
            for f in files:
                yield from (_jsonl(f) if f.suffix == ".jsonl" else [_text(f, p)])
        elif fmt == "jsonl" or (fmt == "auto" and p.suffix.lower() == ".jsonl"):
            yield from _jsonl(p)
        else:
            yield _text(p, p)
