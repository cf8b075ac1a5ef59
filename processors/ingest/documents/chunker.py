"""Token-aware chunking: windows of a document's text that fit the embedding model.

Text is split into paragraphs (blank lines) and sentences (spaCy's English tokenizer and rule-based
sentencizer: "Dr. Smith" and "U.S. Army" stay whole; a tenth of the cost of the parser's
boundaries, which the extractor computes later anyway); sentences are packed into chunks
of at most `max_tokens` tokens as the embedding model's own tokenizer counts them (the model
truncates at 256: a chunk must fit whole), a paragraph break ends a chunk that is already half
full, and each chunk after the first repeats up to `overlap_tokens` of the sentences before it.
A sentence too long for one chunk is cut into token windows. Pure functions; no I/O.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

_PARAGRAPH = re.compile(r"\n\s*\n")
MIN_SECTION_TOKENS = 16  # a chunk shorter than this does not end at a section start (a heading alone)
SPACY_SLICE = 200_000  # characters of one paragraph given to spaCy at a time (it refuses over 1M)
_splitter: Any = None
_splitter_lock = threading.Lock()  # one spaCy pipeline per process; its tokenizer cache is not shared safely


class ChunkingParams(BaseModel):
    """Flow parameters of chunking (`chunk-tokens`, `chunk-overlap`)."""

    chunk_tokens: int = Field(default=200, ge=16, le=254)  # 254 + [CLS] + [SEP] = the model's 256
    chunk_overlap: int = Field(default=32, ge=0, le=128)


@dataclass(frozen=True)
class Span:
    """A chunk of text: character offsets and its token count."""

    start: int
    end: int
    tokens: int


def _sentence_splitter() -> Any:
    """spaCy's English tokenizer with its rule-based sentencizer (built once)."""
    global _splitter
    if _splitter is None:
        import spacy

        nlp = spacy.blank("en")
        nlp.add_pipe("sentencizer")
        nlp.max_length = SPACY_SLICE + 1
        _splitter = nlp
    return _splitter


def _slices(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """[start, end) in pieces of at most SPACY_SLICE characters, cut at whitespace where there is some."""
    out = []
    while end - start > SPACY_SLICE:
        cut = text.rfind(" ", start + SPACY_SLICE // 2, start + SPACY_SLICE)
        cut = cut if cut > start else start + SPACY_SLICE
        out.append((start, cut))
        start = cut
    out.append((start, end))
    return out


def sentences(text: str) -> list[tuple[int, int, bool]]:
    """(start, end, starts a paragraph) of every sentence, whitespace trimmed."""
    paragraphs: list[tuple[int, int]] = []
    para_start = 0
    for para_end in [m.start() for m in _PARAGRAPH.finditer(text)] + [len(text)]:
        paragraphs += [(para_start, para_end)] if text[para_start:para_end].strip() else []
        m = _PARAGRAPH.match(text, para_end)
        para_start = m.end() if m else para_end
    pieces = [(s, e, i) for i, (ps, pe) in enumerate(paragraphs) for s, e in _slices(text, ps, pe)]
    out: list[tuple[int, int, bool]] = []
    last_paragraph = -1
    with _splitter_lock:
        nlp = _sentence_splitter()
        docs = nlp.pipe(text[s:e] for s, e, _ in pieces)
        for (offset, _, paragraph), doc in zip(pieces, docs, strict=True):
            for sent in doc.sents:
                span = sent.text
                lead = len(span) - len(span.lstrip())
                s, e = offset + sent.start_char + lead, offset + sent.start_char + len(span.rstrip())
                if e > s:
                    out.append((s, e, paragraph != last_paragraph))
                    last_paragraph = paragraph
    return out


def _windows(offsets: list[tuple[int, int]], max_tokens: int, overlap: int) -> list[Span]:
    """Token windows over one over-long sentence's tokens."""
    step = max(1, max_tokens - overlap)
    spans = []
    for i in range(0, len(offsets), step):
        window = offsets[i : i + max_tokens]
        spans.append(Span(window[0][0], window[-1][1], len(window)))
        if i + max_tokens >= len(offsets):
            break
    return spans


def chunk_spans(
    text: str,
    token_offsets: list[tuple[int, int]],
    max_tokens: int,
    overlap_tokens: int,
    pages: Sequence[int] = (),
    headings: Sequence[int] = (),
) -> list[Span]:
    """The chunks of `text`, given the (start, end) character offsets of its tokens as the
    embedding model's tokenizer produces them (see the module docstring). A chunk also ends where
    a page (or slide) of the file starts, and where a heading starts unless the chunk holds fewer
    than MIN_SECTION_TOKENS (a short section joins the next), with no overlap across the break:
    a chunk lies on one page, under one heading (`pages`, `headings`: character offsets)."""
    starts = [s for s, _ in token_offsets]
    units: list[tuple[int, int, int, bool]] = []  # (start, end, tokens, starts a paragraph)
    for s, e, para in sentences(text):
        lo, hi = bisect.bisect_left(starts, s), bisect.bisect_left(starts, e)
        if hi - lo <= max_tokens:
            units.append((s, e, hi - lo, para))
        else:
            windows = _windows(token_offsets[lo:hi], max_tokens, overlap_tokens)
            units += [(w.start, w.end, w.tokens, para and i == 0) for i, w in enumerate(windows)]
    if not units:
        return []
    chunks: list[Span] = []
    current: list[tuple[int, int, int, bool]] = []
    for unit in units:
        size = sum(u[2] for u in current)
        full = size + unit[2] > max_tokens or (unit[3] and size >= max_tokens // 2)
        crossed = bool(current) and (
            _starts_between(pages, current[0][0], unit[0])
            or (size >= MIN_SECTION_TOKENS and _starts_between(headings, current[0][0], unit[0]))
        )
        if current and (full or crossed):
            chunks.append(Span(current[0][0], current[-1][1], size))
            current = [] if crossed else _overlap(current, overlap_tokens, max_tokens - unit[2])
        current.append(unit)
    chunks.append(Span(current[0][0], current[-1][1], sum(u[2] for u in current)))
    return chunks


def _starts_between(starts: Sequence[int], after: int, at: int) -> bool:
    """Whether one of the sorted `starts` lies in (after, at]."""
    i = bisect.bisect_right(starts, after)
    return i < len(starts) and starts[i] <= at


def _overlap(previous: list[tuple[int, int, int, bool]], overlap: int, room: int) -> list[tuple[int, int, int, bool]]:
    """The trailing units of the previous chunk that fit in `overlap` tokens (and the room left)."""
    kept: list[tuple[int, int, int, bool]] = []
    total = 0
    for unit in reversed(previous[1:]):  # never repeat a whole chunk
        if total + unit[2] > min(overlap, room):
            break
        kept.insert(0, unit)
        total += unit[2]
    return kept
