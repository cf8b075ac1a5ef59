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

# Re-exported: the readers' common types are the package's too.
from processors.ingest.documents.formats.text import Extracted as Extracted
from processors.ingest.documents.formats.text import TextBuilder as TextBuilder
from processors.ingest.documents.formats.text import UnreadableFile as UnreadableFile
from schemas.documents import MAX_DOCUMENT_CHARS

Kind = Literal["pdf", "docx", "pptx", "html", "text"]
MAX_FILE_BYTES = 64 << 20  # a document file (checked before it is read)
MAX_UNZIPPED_BYTES = 512 << 20  # what a DOCX/PPTX may expand to (a zip bomb is refused unopened)
BINARY_SUFFIXES = {".pdf": "pdf", ".docx": "docx", ".pptx": "pptx"}
HTML_SUFFIXES = {".html", ".htm", ".xhtml"}
CONTENT_TYPES: dict[str, Kind] = {
    "application/pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
    "text/html": "html",
    "application/xhtml+xml": "html",
}
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # .doc / .ppt / .xls (the binary Office formats)


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


def extract(data: bytes, name: str = "", content_type: str = "", charset: str = "utf-8") -> Extracted:
    """The text, sections and title of a file's bytes (see the module docstring)."""
    if len(data) > MAX_FILE_BYTES:
        raise UnreadableFile(f"{len(data):,} bytes, over the limit of {MAX_FILE_BYTES:,} for one document")
    kind = kind_of(data, name, content_type)
    if kind == "text":
        try:
            text = data.decode(charset)
        except UnicodeDecodeError as e:
            raise UnreadableFile(f"not {charset} text ({e.reason} at byte {e.start})") from None
        except LookupError:
            raise UnreadableFile(f"unknown charset {charset!r}") from None
        if len(text) > MAX_DOCUMENT_CHARS:
            raise UnreadableFile(f"its text is longer than {MAX_DOCUMENT_CHARS:,} characters; split the file")
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
