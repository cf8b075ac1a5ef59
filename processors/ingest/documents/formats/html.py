"""A web page's main text (lxml.html): scripts, styles, navigation, headers, footers, asides and
forms are dropped; the page's <main> (else <article>, else its body) is read block by block, its
headings marking sections; the title is the page's <title> (else its first <h1>)."""

from __future__ import annotations

from processors.ingest.documents.formats.text import Extracted, TextBuilder, UnreadableFile

DROPPED = (
    "//script|//style|//noscript|//template|//svg|//nav|//header|//footer|//aside|//form|//button"
    "|//*[@role='navigation']|//*[@role='banner']|//*[@role='contentinfo']|//*[@hidden]|//*[@aria-hidden='true']"
)
BLOCKS = ("p", "h1", "h2", "h3", "h4", "h5", "h6", "li", "pre", "blockquote", "td", "th", "dt", "dd",
          "figcaption", "caption")  # fmt: skip
HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}


def extract_html(data: bytes) -> Extracted:
    """The page's main text as paragraphs, sections at its headings."""
    import lxml.etree
    import lxml.html

    try:
        page = lxml.html.document_fromstring(data)
    except (lxml.etree.ParserError, ValueError) as e:
        raise UnreadableFile(f"an HTML page that cannot be parsed ({e})") from None
    title = " ".join((page.findtext(".//title") or "").split())
    for node in page.xpath(DROPPED):
        node.drop_tree()
    roots = page.xpath("//main") or page.xpath("//article") or page.xpath("//*[@role='main']") or page.xpath("//body")
    out = TextBuilder()
    for root in roots[:1] or [page]:
        for el in root.iter(*BLOCKS):
            if any(a.tag in BLOCKS for a in el.iterancestors()):
                continue  # its text is part of the enclosing block's
            if el.tag in HEADINGS:
                out.heading(el.text_content())
                if el.tag == "h1" and not title:
                    title = " ".join(el.text_content().split())
            elif el.tag == "pre":
                out.paragraph(el.text_content())
            else:
                out.paragraph(" ".join(el.text_content().split()))
        if not out.parts:  # text straight in <div>s, no blocks: the text as it reads
            out.paragraph(root.text_content())
    extracted = out.build(title)
    if not extracted.text.strip():
        raise UnreadableFile("an HTML page with no text outside navigation, scripts and forms")
    return extracted
