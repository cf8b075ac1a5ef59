"""Documents from the files users have: the text of a PDF's text layer, a Word (DOCX) or
PowerPoint (PPTX) file, a web page (HTML), or plain text and markdown — with `sections` saying
where each part of the text is in the file (PDF page, slide, heading), so chunks can be cited by
page. Pure functions over bytes (call them off the event loop); a file kgflow cannot read raises
`UnreadableFile` with the reason (encrypted, no text layer, corrupt, not a format it knows).

Libraries, chosen by measurement (see the commit that added them): pypdf (pure Python, no
dependencies; as good as pdfminer.six and pdfium on real PDFs here), python-docx and python-pptx
(lxml), and lxml.html with kgflow's own main-content rules for web pages (trafilatura gave the
same text on a documentation page at 10x the time and 68 MB of dependencies).
"""

from __future__ import annotations

import io
import zipfile
from typing import Literal

from pydantic import BaseModel, Field

# Re-exported: the readers' common types are the package's too.
from processors.ingest.documents.formats.text import Extracted as Extracted
from processors.ingest.documents.formats.text import TextBuilder as TextBuilder
from processors.ingest.documents.formats.text import UnreadableFile as UnreadableFile
from schemas.documents import MAX_DOCUMENT_CHARS, Section

Kind = Literal["pdf", "docx", "pptx", "html", "text"]
MAX_FILE_BYTES = 64 << 20  # a document file sent to the gateway (checked before it is read)
# A book is cut into parts a load request can carry (MAX_DOCUMENT_CHARS), at a page or paragraph.
PART_CHARS = MAX_DOCUMENT_CHARS * 4 // 5
MAX_UNZIPPED_BYTES = 512 << 20  # what a DOCX/PPTX may expand to (a zip bomb is refused unopened)
BINARY_SUFFIXES = {".pdf": "pdf", ".docx": "docx", ".pptx": "pptx"}
HTML_SUFFIXES = {".html", ".htm", ".xhtml"}
MARKDOWN_SUFFIXES = (".md", ".markdown")
CONTENT_TYPES: dict[str, Kind] = {
    "application/pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
    "text/html": "html",
    "application/xhtml+xml": "html",
}
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # .doc / .ppt / .xls (the binary Office formats)


class FileLimits(BaseModel):
    """How big a file `kgflow load documents` reads (environment KGFLOW_MAX_FILE_MB): an operator's
    bound on one load's memory, far above a book (a 1,000-page PDF is a few MB)."""

    max_file_mb: int = Field(default=256, ge=1, le=1 << 20)

    @property
    def max_bytes(self) -> int:
        """The bound in bytes."""
        return self.max_file_mb << 20

    def refusal(self, size: int) -> str:
        """Why a file of `size` bytes is not read."""
        return f"{size:,} bytes, over the limit of {self.max_file_mb} MB a file (KGFLOW_MAX_FILE_MB sets it)"


def parts(found: Extracted, limit: int = PART_CHARS) -> list[Extracted]:
    """A long text cut into parts of at most `limit` characters, each at a section start (a page,
    a heading) or else a paragraph, line or word break past its middle; each part's sections are
    its own, starting with the page and heading it opens on."""
    out: list[Extracted] = []
    text, sections, begin = found.text, found.sections, 0
    while begin < len(text):
        end = len(text) if len(text) - begin <= limit else _cut_at(text, sections, begin, begin + limit)
        inside = [s for s in sections if begin < s.start < end]
        opening = [s for s in sections if s.start <= begin][-1:]
        rebased = [s.model_copy(update={"start": max(0, s.start - begin)}) for s in opening + inside]
        out.append(Extracted(text[begin:end], rebased, found.title))
        begin = end
    return out or [found]


def part_ids(doc_id: str, count: int) -> list[str]:
    """The ids of a document's `count` parts: the id itself for one, else `ID#1`, `ID#2`, ..."""
    return [doc_id] if count == 1 else [f"{doc_id}#{n}" for n in range(1, count + 1)]


def _cut_at(text: str, sections: list[Section], begin: int, most: int) -> int:
    middle = begin + (most - begin) // 2
    starts = [s.start for s in sections if middle < s.start <= most]
    if starts:
        return starts[-1]
    for sep in ("\n\n", "\n", " "):
        at = text.rfind(sep, middle, most)
        if at > 0:
            return at + len(sep)
    return most


def kind_of(data: bytes, name: str = "", content_type: str = "") -> Kind:
    """The format of a file from its first bytes, then its content type, then its name."""
    suffix = name[name.rfind(".") :].lower() if "." in name else ""
    head = data[:1024]
    if b"%PDF-" in head:
        return "pdf"
    if data.startswith(b"PK\x03\x04"):
        return _office_kind(data)
    if data.startswith(OLE_MAGIC):
        raise UnreadableFile("a legacy binary Office file (.doc/.ppt/.xls); save it as .docx or .pptx")
    declared = CONTENT_TYPES.get(content_type.split(";")[0].strip().lower())
    if declared in ("pdf", "docx", "pptx"):
        raise UnreadableFile(f"not a valid {declared.upper()} file (its content does not start like one)")
    if suffix in BINARY_SUFFIXES:
        raise UnreadableFile(f"not a valid {suffix[1:].upper()} file (its content does not start like one)")
    sniff = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if declared == "html" or suffix in HTML_SUFFIXES or sniff.startswith((b"<!doctype html", b"<html")):
        return "html"
    return "text"


def _office_kind(data: bytes) -> Kind:
    try:
        names = set(zipfile.ZipFile(io.BytesIO(data)).namelist())
    except (zipfile.BadZipFile, ValueError) as e:
        raise UnreadableFile(f"a corrupt ZIP container ({e})") from None
    if "word/document.xml" in names:
        return "docx"
    if "ppt/presentation.xml" in names:
        return "pptx"
    raise UnreadableFile("a ZIP archive that is not a DOCX or PPTX file")


def check_unzipped_size(data: bytes) -> None:
    """Refuse a DOCX/PPTX that would expand past MAX_UNZIPPED_BYTES, before parsing it."""
    total = sum(i.file_size for i in zipfile.ZipFile(io.BytesIO(data)).infolist())
    if total > MAX_UNZIPPED_BYTES:
        raise UnreadableFile(f"expands to {total:,} bytes, over the limit of {MAX_UNZIPPED_BYTES:,}")


def extract(
    data: bytes, name: str = "", content_type: str = "", charset: str = "utf-8", limit: int | None = None
) -> Extracted:
    """The text, sections and title of a file's bytes (see the module docstring), refused over
    `limit` bytes (default MAX_FILE_BYTES); the text may be longer than a document holds (`parts`
    cuts it)."""
    limit = MAX_FILE_BYTES if limit is None else limit
    if len(data) > limit:
        raise UnreadableFile(f"{len(data):,} bytes, over the limit of {limit:,} for one document")
    kind = kind_of(data, name, content_type)
    if kind == "text":
        try:
            text = data.decode(charset)
        except UnicodeDecodeError as e:
            raise UnreadableFile(f"not {charset} text ({e.reason} at byte {e.start})") from None
        except LookupError:
            raise UnreadableFile(f"unknown charset {charset!r}") from None
        if name.lower().endswith(MARKDOWN_SUFFIXES) or content_type.split(";")[0].strip().lower() == "text/markdown":
            from processors.ingest.documents.formats.markdown import extract_markdown

            return extract_markdown(text)
        return Extracted(text, [])
    from processors.ingest.documents.formats import html, office, pdf

    if kind in ("docx", "pptx"):
        check_unzipped_size(data)
    reader = {
        "pdf": pdf.extract_pdf,
        "docx": office.extract_docx,
        "pptx": office.extract_pptx,
        "html": html.extract_html,
    }
    return reader[kind](data)
