"""Token-aware chunking with the embedding model's own tokenizer."""

from __future__ import annotations

import pytest

from processors.ingest.documents.chunker import chunk_spans, sentences
from processors.models.embeddings.model import plain_tokenizer


@pytest.fixture(scope="module")
def tok():  # type: ignore[no-untyped-def]
    return plain_tokenizer()


def spans(tok, text: str, size: int, overlap: int):  # type: ignore[no-untyped-def]
    return chunk_spans(text, tok.encode(text, add_special_tokens=False).offsets, size, overlap)


def test_sentences_keep_paragraph_starts_and_offsets() -> None:
    text = "One fish. Two fish!\n\n  Red fish? Blue fish."
    found = sentences(text)
    assert [text[s:e] for s, e, _ in found] == ["One fish.", "Two fish!", "Red fish?", "Blue fish."]
    assert [p for _, _, p in found] == [True, False, True, False]


def test_chunks_fit_the_model_and_cover_the_text(tok) -> None:  # type: ignore[no-untyped-def]
    text = " ".join(f"Sentence number {i} talks about topic {i % 7} at some length here." for i in range(120))
    chunks = spans(tok, text, 60, 12)
    assert len(chunks) > 5
    real = [len(tok.encode(text[c.start : c.end], add_special_tokens=False).ids) for c in chunks]
    assert max(real) <= 60 and real == [c.tokens for c in chunks]  # counted as the model counts
    assert chunks[0].start == 0 and chunks[-1].end == len(text.rstrip())
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert b.start <= a.end  # consecutive chunks overlap or touch: no text is lost
        assert b.start > a.start


def test_overlap_repeats_trailing_sentences_up_to_the_budget(tok) -> None:  # type: ignore[no-untyped-def]
    text = " ".join(f"Short sentence {i}." for i in range(40))
    no_overlap = spans(tok, text, 30, 0)
    overlap = spans(tok, text, 30, 10)
    assert all(b.start >= a.end for a, b in zip(no_overlap, no_overlap[1:], strict=False))
    assert any(b.start < a.end for a, b in zip(overlap, overlap[1:], strict=False))
    assert len(overlap) > len(no_overlap)


def test_a_paragraph_break_ends_a_half_full_chunk(tok) -> None:  # type: ignore[no-untyped-def]
    para = " ".join(f"Word{i} is here." for i in range(12))
    text = para + "\n\n" + para
    per_para = len(tok.encode(para, add_special_tokens=False).ids)
    chunks = spans(tok, text, per_para * 2 - 10, 0)  # both fit in size, but the first is over half full
    assert len(chunks) == 2 and text[chunks[1].start :].startswith("Word0")
    assert len(spans(tok, text, per_para * 3, 0)) == 1  # below half full the next paragraph joins


def test_an_over_long_sentence_is_cut_into_windows(tok) -> None:  # type: ignore[no-untyped-def]
    text = "word " * 500
    chunks = spans(tok, text, 100, 20)
    assert all(c.tokens <= 100 for c in chunks) and len(chunks) >= 6
    assert spans(tok, "", 100, 20) == [] and spans(tok, "   \n\n ", 100, 20) == []
