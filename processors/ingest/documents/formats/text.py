"""What every format reader builds on: the extracted text with its sections, the builder that marks
a section wherever the page or heading changes, and the error of a file kgflow cannot read. (Its own
module, so each reader imports it without importing the package that dispatches to the readers.)"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.documents import Section


class UnreadableFile(ValueError):
    """A file kgflow cannot take text from; the message says why."""


@dataclass(frozen=True)
class Extracted:
    """A file's text, where its parts come from, and the title the file gives itself (or "")."""

    text: str
    sections: list[Section]
    title: str = ""


class TextBuilder:
    """Paragraphs joined by blank lines (the chunker's paragraph breaks), with a Section marked
    wherever the page or the heading changes."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.sections: list[Section] = []
        self._page: int | None = None
        self._heading = ""

    def page(self, number: int) -> None:
        """The text from here on is on page (or slide) `number`."""
        self._page = number
        self._mark()

    def heading(self, text: str, in_text: bool = True) -> None:
        """A heading: the text from here on falls under it (and, `in_text`, it is text too)."""
        text = " ".join(text.split())
        if text:
            self._heading = text[:512]
            self._mark()
            if in_text:
                self.paragraph(text)

    def paragraph(self, text: str) -> None:
        """One paragraph (blank lines inside it are closed up)."""
        text = "\n".join(line.rstrip() for line in text.strip().splitlines() if line.strip())
        if not text:
            return
        if self.parts:
            self.parts.append("\n\n")
            self.length += 2
        self.parts.append(text)
        self.length += len(text)

    def _mark(self) -> None:
        start = self.length + (2 if self.parts else 0)  # where the next paragraph's text begins
        section = Section(start=start, page=self._page, heading=self._heading)
        if self.sections and self.sections[-1].start == start:
            self.sections[-1] = section  # nothing was written under the previous mark
        else:
            self.sections.append(section)

    def build(self, title: str = "") -> Extracted:
        """The text and its sections (a section starting past the end is dropped)."""
        text = "".join(self.parts)
        kept = [s for s in self.sections if s.start < len(text)]
        return Extracted(text, kept, " ".join(title.split())[:2048])
