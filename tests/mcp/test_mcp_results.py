"""The MCP tools' pure parts: results cited by document, page and chunk, documents rebuilt from their
chunks, scopes checked before any request."""

from __future__ import annotations

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from processors.gateway.mcp_results import Answer, DocumentText, Passage
from processors.gateway.mcp_tools import _question, _scope
from schemas.documents import Chunk, DocumentInfo
from schemas.graph_rag import GraphRagResponse
from schemas.lazy_rag import LazyRagResponse
from schemas.terms import LabelledTriple

TEXT = "Marie Curie was born in Warsaw. She moved to Paris in 1891. There she met Pierre Curie, a physicist."


def _windows(text: str, size: int, overlap: int) -> list[Chunk]:
    """Overlapping windows of `text`, as the chunker stores them (with their offsets)."""
    out, start, n = [], 0, 0
    while start < len(text):
        end = min(start + size, len(text))
        out.append(Chunk(id=f"c{n}", document_id="d", ordinal=n, text=text[start:end], start=start, end=end,
                         page=1 + start // 50))  # fmt: skip
        if end == len(text):
            break
        start, n = end - overlap, n + 1
    return out


def test_a_document_is_rebuilt_from_overlapping_chunks_in_any_order() -> None:
    chunks = _windows(TEXT, 30, 8)
    assert len(chunks) > 3
    doc = DocumentText.of("c", DocumentInfo(id="d", title="Curie", chunks=len(chunks)), list(reversed(chunks)))
    assert doc.text == TEXT and doc.complete
    assert [p.chunk_id for p in doc.passages] == [c.id for c in chunks]
    assert {p.page for p in doc.passages} == {1, 2}

    # windows that end and start at a token leave the whitespace between them out
    parted = "Polonium was named after Poland.\n\nRadium came next. It glows."
    spans = [(0, 32), (34, 51), (52, len(parted))]
    gapped = [Chunk(id=f"g{n}", document_id="d", ordinal=n, text=parted[a:b], start=a, end=b)
              for n, (a, b) in enumerate(spans)]  # fmt: skip
    assert DocumentText.of("c", DocumentInfo(id="d", chunks=3), gapped).text == parted

    missing = DocumentText.of("c", DocumentInfo(id="d", chunks=len(chunks)), chunks[:-1])
    assert not missing.complete and "gaps" in missing.text_out()


def test_passages_cite_document_page_and_chunk() -> None:
    chunk = Chunk(id="c9", document_id="notes.pdf", title="The Notes", text="radium  glows\n blue", page=2, score=0.5)
    cite = Passage.of(chunk).cite(1)
    assert cite == "[1] The Notes (notes.pdf), p. 2, chunk c9: radium glows blue"
    assert Passage.of(chunk.model_copy(update={"title": "", "page": None})).cite(3, excerpt=False) == (
        "[3] notes.pdf, chunk c9"
    )


def test_answers_keep_passages_and_facts_best_first() -> None:
    res = LazyRagResponse(response="Polonium [c1].", chunks=[Chunk(id="c1", document_id="p.md", text="polonium")])
    answer = Answer.of("lazy-rag", "docs", res)
    assert answer.passages[0].chunk_id == "c1" and "Sources:\n[1] p.md, chunk c1: polonium" in answer.text()

    triples = [LabelledTriple(s="a", p="r", o=o, s_id="A", p_id="R", o_id=o.upper(), score=sc)
               for o, sc in (("low", 0.1), ("high", 0.9))]  # fmt: skip
    facts = Answer.of("graph-rag", "g", GraphRagResponse(response="", triples=triples)).facts
    assert [f.object for f in facts] == ["high", "low"]


def test_bad_scopes_and_questions_are_refused_by_name() -> None:
    assert _scope(None, None) is None and _scope(None, {}) is None
    assert _scope(["a"], {"year": [1898, 1903]}).document_ids == ["a"]  # type: ignore[union-attr]
    with pytest.raises(ToolError, match="document_ids"):
        _scope([], None)
    with pytest.raises(ToolError, match="document_ids"):
        _scope(["  "], None)
    with pytest.raises(ToolError, match="blank"):
        _question(" \n\t")
    assert _question("  Who?  ") == "Who?"
