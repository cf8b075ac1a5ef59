"""Markdown: its ATX headings (`#` to `######`) mark sections and leave the text, so a chunk is
cited by the heading it falls under and its text is what is under it; the title is a leading `# `
heading. Fenced code blocks are text (a `#` line in them is not a heading)."""

from __future__ import annotations

import re

from processors.ingest.documents.formats.text import Extracted, TextBuilder

_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def extract_markdown(text: str) -> Extracted:
    """The text without its headings, in paragraphs, with a section at each heading."""
    out = TextBuilder()
    block: list[str] = []
    fence = ""
    title = ""

    def close() -> None:
        if block:
            out.paragraph("\n".join(block))
            block.clear()

    for line in text.splitlines():
        if fence:
            block.append(line)
            fence = "" if line.strip().startswith(fence) else fence
        elif m := _FENCE.match(line):
            fence = m.group(1)
            block.append(line)
        elif h := _HEADING.match(line):
            close()
            heading = " ".join((h.group(2) or "").split())
            if h.group(1) == "#" and not out.parts and not title:
                title = heading
            out.heading(heading, in_text=False)
        elif line.strip():
            block.append(line)
        else:
            close()
    close()
    return out.build(title)
