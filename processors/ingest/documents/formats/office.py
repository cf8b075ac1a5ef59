"""Word (DOCX) and PowerPoint (PPTX) files: paragraphs and tables in reading order. A slide is a
page (its title the heading); a Word document's headings are its sections, and its pages are
counted where Word recorded them (page breaks it rendered, or hard page breaks) — a document
with neither has no page numbers, only headings."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from processors.ingest.documents.formats.text import Extracted, TextBuilder, UnreadableFile

if TYPE_CHECKING:  # python-docx and python-pptx are loaded when a file of theirs is read
    from docx.table import Table as DocxTable
    from docx.text.paragraph import Paragraph
    from pptx.shapes.base import BaseShape
    from pptx.table import Table as PptxTable

CORRUPT = (zipfile.BadZipFile, KeyError, ValueError, TypeError, AttributeError, IndexError, OSError)


def _table_rows(table: DocxTable | PptxTable) -> Iterator[str]:
    for row in table.rows:
        cells = list(dict.fromkeys(" ".join(c.text.split()) for c in row.cells))  # merged cells repeat
        if any(cells):
            yield " | ".join(cells)


def _docx_breaks(paragraph: Paragraph) -> int:
    """Page breaks inside a paragraph: those Word rendered when it saved, else hard ones."""
    rendered = len(paragraph.rendered_page_breaks)
    if rendered:
        return rendered
    ns = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
    return sum(1 for br in paragraph._p.iter(f"{ns}br") if br.get(f"{ns}type") == "page")


def extract_docx(data: bytes) -> Extracted:
    """Paragraphs (headings mark sections), tables as `a | b` rows, pages where Word counted them."""
    import docx
    from docx.table import Table

    try:
        document = docx.Document(io.BytesIO(data))
        blocks = list(document.iter_inner_content())
        paged = any(_docx_breaks(b) for b in blocks if not isinstance(b, Table))
        out = TextBuilder()
        page = 1
        if paged:
            out.page(page)
        for block in blocks:
            if isinstance(block, Table):
                out.paragraph("\n".join(_table_rows(block)))
                continue
            style = (block.style.name if block.style is not None else "") or ""
            if style.startswith("Heading") or style == "Title":
                out.heading(block.text)
            else:
                out.paragraph(block.text)
            breaks = _docx_breaks(block) if paged else 0
            if breaks:  # the text after the break is on the next page (approximately: from the next paragraph)
                page += breaks
                out.page(page)
        title = document.core_properties.title or ""
    except CORRUPT as e:
        raise _corrupt("DOCX", e) from None
    return _with_text(out.build(title), "DOCX")


def _shape_texts(shapes: Iterable[BaseShape]) -> Iterator[str]:
    """The text of shapes in z-order: text frames paragraph by paragraph, tables row by row."""
    from pptx.shapes.autoshape import Shape
    from pptx.shapes.graphfrm import GraphicFrame
    from pptx.shapes.group import GroupShape

    for shape in shapes:
        if isinstance(shape, GroupShape):
            yield from _shape_texts(shape.shapes)
        elif isinstance(shape, GraphicFrame) and shape.has_table:
            yield "\n".join(_table_rows(shape.table))
        elif isinstance(shape, Shape) and shape.has_text_frame:  # placeholders too
            for p in shape.text_frame.paragraphs:
                yield "".join(r.text for r in p.runs)


def extract_pptx(data: bytes) -> Extracted:
    """Each slide a page, its title the heading, then its other text and its speaker notes."""
    from pptx import Presentation

    try:
        deck = Presentation(io.BytesIO(data))
        out = TextBuilder()
        for number, slide in enumerate(deck.slides, 1):
            out.page(number)
            title_shape = slide.shapes.title
            out.heading(title_shape.text if title_shape is not None else "")
            others = [s for s in slide.shapes if title_shape is None or s.shape_id != title_shape.shape_id]
            for text in _shape_texts(others):
                out.paragraph(text)
            if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
                out.paragraph(slide.notes_slide.notes_text_frame.text)
        title = deck.core_properties.title or ""
    except CORRUPT as e:
        raise _corrupt("PPTX", e) from None
    return _with_text(out.build(title), "PPTX")


def _corrupt(kind: str, e: Exception) -> UnreadableFile:
    return UnreadableFile(f"a corrupt {kind} file ({type(e).__name__}: {str(e)[:200]})")


def _with_text(extracted: Extracted, kind: str) -> Extracted:
    if not extracted.text.strip():
        raise UnreadableFile(f"a {kind} file with no text")
    return extracted
