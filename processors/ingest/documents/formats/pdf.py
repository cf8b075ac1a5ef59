"""The text layer of a PDF, page by page (pypdf). A PDF with no text layer (a scan), an encrypted
one that needs a password, or a corrupt one is refused with that reason."""

from __future__ import annotations

import io
import logging

from processors.ingest.documents.formats.text import Extracted, TextBuilder, UnreadableFile

MIN_TEXT_CHARS = 1  # a PDF whose pages yield fewer characters than this (whitespace aside) has no text layer


def extract_pdf(data: bytes) -> Extracted:
    """Each page's text as paragraphs under a page mark; the title from the document information."""
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, PdfReadError

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # pypdf warns on every odd font: the reason is enough
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")  # an owner password alone still lets anyone read it
            except (DependencyError, NotImplementedError) as e:
                raise UnreadableFile(f"an encrypted PDF this reader cannot open ({e})") from None
            if not opened:
                raise UnreadableFile("an encrypted PDF: it needs a password; save an unprotected copy")
        out = TextBuilder()
        for number, page in enumerate(reader.pages, 1):
            out.page(number)
            for block in (page.extract_text() or "").split("\n\n"):
                out.paragraph(block)
        title = str((reader.metadata or {}).get("/Title") or "")
    except UnreadableFile:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError, OSError) as e:
        raise UnreadableFile(f"a corrupt PDF ({type(e).__name__}: {str(e)[:200]})") from None
    if len(out.build().text.strip()) < MIN_TEXT_CHARS:
        pages = len(reader.pages)
        raise UnreadableFile(
            f"no text layer in its {pages} page{'s' if pages != 1 else ''} (a scan?): kgflow reads the text "
            "of PDFs, not images; run OCR (e.g. ocrmypdf) first"
        )
    return out.build(title)
