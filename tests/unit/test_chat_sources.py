"""The chat routes' footnotes name the page (PDF page, slide) or section of each cited passage, in
the Sources footer and in the structured `sources`; a no-model answer's `[chunk, p. N]` citations
are renumbered like a model's `[chunk]` ones."""

from __future__ import annotations

from types import SimpleNamespace

from processors.algorithms.extractive import no_model_answer
from processors.gateway.chat_format import sources_block, sources_fields, sources_of, with_footnotes
from schemas.documents import Chunk

CHUNKS = [
    Chunk(id="c-pdf", document_id="notes.pdf", title="The Curie Notes", page=2,
          text="In July 1898 the Curies named the new element polonium, after Poland."),
    Chunk(id="c-md", document_id="guide.md", title="Lab Guide", section="Instruments",
          text="The electrometer was built by Pierre Curie and his brother Jacques."),
]  # fmt: skip


def test_footnotes_and_structured_sources_name_page_and_section() -> None:
    answer = no_model_answer("No model.", "Who built the electrometer, and what was named polonium?", CHUNKS)
    assert "[c-pdf, p. 2]" in answer and "[c-md, Instruments]" in answer
    text, listed = with_footnotes(answer, sources_of(SimpleNamespace(chunks=CHUNKS)))
    assert "[c-pdf" not in text and "[c-md" not in text and "[1]" in text and "[2]" in text
    footer = sources_block(listed)
    assert "[1] The Curie Notes (notes.pdf, p. 2): In July 1898" in footer
    assert "[2] Lab Guide (guide.md, Instruments): The electrometer" in footer
    wire = sources_fields(listed)["sources"]
    assert (wire[0]["page"], wire[1]["section"]) == (2, "Instruments") and "page" not in wire[1]


def test_a_bracket_that_is_not_a_citation_stays() -> None:
    text, listed = with_footnotes("See [note, p. 4] and [c-md].", sources_of(SimpleNamespace(chunks=CHUNKS)))
    assert text == "See [note, p. 4] and [1]." and [s.chunk_id for s in listed] == ["c-md"]
