"""Document files as users have them, made by the libraries that write them (reportlab for PDF,
python-docx, python-pptx, pypdf to encrypt): a PDF with a text layer, a DOCX, a PPTX and a web
page, each stating one fact in a known place, plus files kgflow must refuse with a reason — an
encrypted PDF, a scanned PDF (an image, no text layer) and corrupt files."""

from __future__ import annotations

import io
from pathlib import Path

PDF_PAGES = [
    "The Curie notes. This file collects notes on the Curie family and their laboratory in Paris.",
    "Marie Curie discovered a new element in 1898 and named it polonium after Poland, her homeland. "
    "Dr. Smith of the U.S. Bureau of Standards later measured its half-life.",
    "The notes end with a list of the instruments kept in the laboratory: an electrometer and scales.",
]
DOCX_FACT = "Pierre Curie built the piezoelectric quartz electrometer with his brother Jacques Curie."
PPTX_FACT = "Radium glows faintly blue in the dark and was once painted on watch dials."
HTML_FACT = "Irene Joliot-Curie shared the 1935 Nobel Prize in Chemistry with Frederic Joliot."


def text_pdf(title: str = "The Curie Notes", pages: list[str] | None = None) -> bytes:
    """A PDF whose pages carry a text layer (reportlab), with `title` in its document information."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    pdf = canvas.Canvas(buf, pagesize=A4)
    pdf.setTitle(title)
    for text in pages or PDF_PAGES:
        y = 780
        line = ""
        for word in text.split():  # wrap at ~80 characters a line
            if len(line) + len(word) > 80:
                pdf.drawString(60, y, line)
                y, line = y - 16, ""
            line = f"{line} {word}".strip()
        pdf.drawString(60, y, line)
        pdf.showPage()
    pdf.save()
    return buf.getvalue()


def scanned_pdf() -> bytes:
    """A PDF page that is only a picture of text (as a scanner makes it): no text layer."""
    from PIL import Image, ImageDraw
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas

    picture = Image.new("RGB", (900, 200), "white")
    ImageDraw.Draw(picture).text((20, 80), "Marie Curie named polonium after Poland.", fill="black")
    buf = io.BytesIO()
    pdf = canvas.Canvas(buf, pagesize=A4)
    pdf.drawImage(ImageReader(picture), 40, 500, width=500, height=110)
    pdf.showPage()
    pdf.save()
    return buf.getvalue()


def encrypted_pdf(password: str = "secret") -> bytes:
    """A text PDF that needs a password to open."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(text_pdf())))
    writer.encrypt(user_password=password, owner_password=password + "-owner", algorithm="RC4-128")
    buf = io.BytesIO()
    writer.write(buf)
    return buf.getvalue()


def docx_file() -> bytes:
    """A Word document: a title, two headed sections (a hard page break between them) and a table."""
    import docx

    d = docx.Document()
    d.core_properties.title = "Laboratory Handbook"
    d.add_heading("Laboratory Handbook", level=0)
    d.add_heading("Safety", level=1)
    d.add_paragraph("Keep radioactive samples in lead boxes. Wash hands after handling them.")
    d.add_page_break()
    d.add_heading("Instruments", level=1)
    d.add_paragraph(DOCX_FACT)
    table = d.add_table(rows=2, cols=2)
    for row, (a, b) in zip(table.rows, [("Instrument", "Maker"), ("Electrometer", "Pierre Curie")], strict=True):
        row.cells[0].text, row.cells[1].text = a, b
    buf = io.BytesIO()
    d.save(buf)
    return buf.getvalue()


def pptx_file() -> bytes:
    """A deck of three slides (title and bullets), speaker notes on the second."""
    from pptx import Presentation

    deck = Presentation()
    deck.core_properties.title = "Radioactivity Lecture"
    slides = [
        ("Radioactivity", ["A lecture on the elements the Curies found."]),
        ("Radium", [PPTX_FACT, "It was isolated as a pure metal in 1910."]),
        ("Questions", ["Thank you for listening."]),
    ]
    for title, bullets in slides:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        body = slide.placeholders[1].text_frame
        body.text = bullets[0]
        for more in bullets[1:]:
            body.add_paragraph().text = more
        if title == "Radium":
            slide.notes_slide.notes_text_frame.text = "Show the photograph of the glowing vial."
    buf = io.BytesIO()
    deck.save(buf)
    return buf.getvalue()


HTML_PAGE = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Nobel Prizes of the Curie Family</title>
<style>body {{ font-family: serif; }}</style><script>var tracking = "do not index me";</script></head>
<body><header><a href="/">Home</a> | <a href="/about">About</a></header>
<nav><ul><li>Menu item one</li><li>Menu item two</li></ul></nav>
<main><h1>Nobel Prizes of the Curie Family</h1>
<h2>Marie and Pierre</h2><p>Marie and Pierre Curie shared the 1903 Nobel Prize in Physics.</p>
<h2>Irene</h2><p>{HTML_FACT}</p></main>
<footer>Copyright the site. Cookie settings.</footer></body></html>
"""


def write_corpus(folder: Path) -> dict[str, Path]:
    """Every good and bad file in `folder`, by role."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "pdf": ("curie-notes.pdf", text_pdf()),
        "docx": ("handbook.docx", docx_file()),
        "pptx": ("lecture.pptx", pptx_file()),
        "html": ("nobel.html", HTML_PAGE.encode()),
        "encrypted": ("locked.pdf", encrypted_pdf()),
        "scanned": ("scan.pdf", scanned_pdf()),
        "corrupt": ("broken.docx", docx_file()[:700]),  # cut short: the ZIP's directory is gone
    }
    out = {}
    for role, (name, data) in files.items():
        (folder / name).write_bytes(data)
        out[role] = folder / name
    return out
