"""Text from PDF, DOCX, PPTX and HTML files with where each part is in the file (page, slide,
heading), and a clear reason for each file that cannot be read. Files made by real writers
(tests/documents/format_files.py), read by the real readers."""

from __future__ import annotations

import io
import zipfile

import pytest

from processors.ingest.documents import formats
from processors.ingest.documents.formats import UnreadableFile, extract, kind_of
from schemas.documents import Section
from tests.documents.format_files import (
    DOCX_FACT,
    HTML_FACT,
    HTML_PAGE,
    PPTX_FACT,
    docx_file,
    encrypted_pdf,
    pptx_file,
    scanned_pdf,
)
from tests.documents.format_files import text_pdf as make_pdf


def page_of(found, needle: str) -> tuple[int | None, str]:  # type: ignore[no-untyped-def]
    """The (page, heading) of the section holding `needle`."""
    at = found.text.index(needle)
    section = [s for s in found.sections if s.start <= at][-1]
    return section.page, section.heading


def test_a_pdf_reads_page_by_page_with_its_title() -> None:
    found = extract(make_pdf(), "notes.pdf")
    assert found.title == "The Curie Notes"
    assert page_of(found, "named it polonium") == (2, "")
    assert page_of(found, "electrometer and scales") == (3, "")
    assert [s.page for s in found.sections] == [1, 2, 3]


def test_a_docx_reads_headings_tables_and_hard_page_breaks() -> None:
    found = extract(docx_file(), "handbook.docx")
    assert found.title == "Laboratory Handbook"
    assert page_of(found, DOCX_FACT) == (2, "Instruments")
    assert page_of(found, "lead boxes") == (1, "Safety")
    assert "Electrometer | Pierre Curie" in found.text


def test_a_pptx_reads_slides_as_pages_with_notes() -> None:
    found = extract(pptx_file(), "lecture.pptx")
    assert found.title == "Radioactivity Lecture"
    assert page_of(found, PPTX_FACT) == (2, "Radium")
    assert page_of(found, "glowing vial") == (2, "Radium")  # speaker notes belong to their slide
    assert page_of(found, "Thank you") == (3, "Questions")


def test_a_web_page_keeps_its_main_text_and_headings() -> None:
    found = extract(HTML_PAGE.encode(), "nobel.html")
    assert found.title == "Nobel Prizes of the Curie Family"
    assert page_of(found, HTML_FACT) == (None, "Irene")
    for boilerplate in ("Menu item", "tracking", "Cookie", "Home", "font-family"):
        assert boilerplate not in found.text


def test_formats_are_told_by_content_not_name() -> None:
    assert kind_of(make_pdf(), "renamed.txt") == "pdf"
    assert kind_of(docx_file(), "x.bin") == "docx" and kind_of(pptx_file(), "x") == "pptx"
    assert kind_of(b"  <!DOCTYPE html><p>x</p>", "page") == "html"
    assert kind_of(b"plain words", "notes.txt") == "text"


@pytest.mark.parametrize(
    ("data", "name", "reason"),
    [
        (encrypted_pdf(), "locked.pdf", "encrypted PDF: it needs a password"),
        (scanned_pdf(), "scan.pdf", "no text layer in its 1 page"),
        (b"%PDF-1.7\n\xff\xfe garbage", "broken.pdf", "corrupt PDF"),
        (docx_file()[:700], "cut.docx", "corrupt ZIP"),
        (b"just text", "report.pdf", "not a valid PDF"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 100, "old.doc", "legacy binary Office"),
        ("déjà".encode("latin-1"), "latin.txt", "not utf-8 text"),
        (b"<html><body><nav>Only a menu</nav><script>x()</script></body></html>", "empty.html", "no text"),
    ],
)
def test_what_cannot_be_read_says_why(data: bytes, name: str, reason: str) -> None:
    with pytest.raises(UnreadableFile, match=reason):
        extract(data, name)


def test_a_zip_bomb_is_refused_unopened(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(formats, "MAX_UNZIPPED_BYTES", 100_000)  # the real limit is 512 MiB
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("word/document.xml", "<w/>")
        z.writestr("filler.bin", b"\0" * 200_000)  # 200 kB of zeros deflate to a few hundred bytes
    assert len(buf.getvalue()) < 2000
    with pytest.raises(UnreadableFile, match="expands to 200,"):
        extract(buf.getvalue(), "bomb.docx")


def test_a_file_over_the_size_limit_is_refused_before_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(formats, "MAX_FILE_BYTES", 1000)
    with pytest.raises(UnreadableFile, match="over the limit"):
        extract(make_pdf(), "big.pdf")


def test_chunks_end_at_pages_and_at_headings_of_a_real_length() -> None:
    from processors.ingest.documents.chunker import ChunkingParams
    from processors.ingest.documents.pipeline import chunk_document
    from processors.models.embeddings.model import plain_tokenizer
    from schemas.documents import Document

    found = extract(pptx_file(), "lecture.pptx")
    doc = Document(id="lecture.pptx", title=found.title, text=found.text, sections=found.sections)
    chunks = chunk_document(doc, plain_tokenizer(), ChunkingParams())
    assert [(c.page, c.section) for c in chunks] == [(1, "Radioactivity"), (2, "Radium"), (3, "Questions")]
    assert all(c.text.startswith(c.section) for c in chunks)  # no overlap across a slide
    found = extract(HTML_PAGE.encode(), "nobel.html")
    doc = Document(id="nobel.html", text=found.text, sections=found.sections)
    chunks = chunk_document(doc, plain_tokenizer(), ChunkingParams())
    # the title and the first short section make one chunk; "Irene" starts the next
    assert [c.section for c in chunks] == ["Nobel Prizes of the Curie Family", "Irene"]


def test_markdown_headings_are_sections_and_leave_the_text() -> None:
    md = "# Field Notes\nIntro line.\n\n## Polonium\nMarie named it polonium.\n```\n# not a heading\n```\n"
    md += "### Radium ###\nIt glows."
    found = extract(md.encode(), "notes.md")
    assert found.title == "Field Notes"
    assert found.text == "Intro line.\n\nMarie named it polonium.\n```\n# not a heading\n```\n\nIt glows."
    assert page_of(found, "Intro") == (None, "Field Notes")
    assert page_of(found, "# not a heading") == (None, "Polonium")  # a fenced `#` is code, not a heading
    assert page_of(found, "It glows") == (None, "Radium")


def test_a_book_is_cut_into_parts_at_pages_each_citing_its_own() -> None:
    text = "".join(f"Page {n} says something.".ljust(99) + "\n" for n in range(1, 11))
    book = formats.Extracted(text, [Section(start=(n - 1) * 100, page=n) for n in range(1, 11)], "Book")
    pieces = formats.parts(book, limit=350)
    assert "".join(p.text for p in pieces) == text and all(len(p.text) <= 350 for p in pieces)
    assert [p.text[:7] for p in pieces] == ["Page 1 ", "Page 4 ", "Page 7 ", "Page 10"]  # each at a page
    for p in pieces:
        assert p.title == "Book" and p.sections[0].start == 0
        assert all(p.text[s.start :].startswith(f"Page {s.page} ") for s in p.sections)
    words = formats.parts(formats.Extracted("word " * 100, [], ""), limit=120)
    assert all(p.text.endswith(" ") and len(p.text) <= 120 for p in words[:-1])  # never inside a word
