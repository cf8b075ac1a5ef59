"""The extractive answer (pure): with no language model, a question is answered by the sentences
of the retrieved chunks that best answer it — whole sentences, in the order they are read, each
with its citation (chunk id, and the page or section of its file) — under a character budget. A
reader gets sentences that say something, not passages cut off mid-word.

Scoring: the question's terms (stemmed, no stopwords) each weigh their inverse frequency among
the candidate sentences, so the words that pick a sentence out count most; a sentence scores
the weight of the question terms it holds over the weight of all of them, plus the cosine to the
question vector when the caller has sentence vectors, plus a small prior for the chunk's rank
(the retrieval already judged the whole passage).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from processors.algorithms.bm25 import terms
from schemas.documents import Chunk

BUDGET_CHARS = 800  # a few sentences: what a reader takes in at a glance
MAX_SENTENCES = 5
ANSWER_PASSAGES = 12  # the best chunks the sentences are chosen from (measured: bench/no_model_answer.py)
RANK_PRIOR = 0.15  # the best chunk's edge over an equally matching sentence of a later one
VECTOR_WEIGHT = 0.5
_WORDS = re.compile(r"[^\W\d_]{2,}")  # a sentence has two of these: a page number or list marker has none
# A sentence ends at . ! ? (closing quotes/brackets kept) before a space and a capital, digit or
# quote; or at a blank line (a paragraph, a heading, a list item on its own line).
_END = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+(?=[\"'“‘(\[]?[A-Z0-9])|\n\s*\n|\n(?=\s*(?:[-*•]|\d+[.)])\s)")
# Words whose period does not end a sentence: titles, initials, common Latin abbreviations.
_ABBREV = re.compile(
    r"(?:\b(?:Mr|Mrs|Ms|Dr|Prof|St|Jr|Sr|Mt|No|vs|etc|e\.g|i\.e|cf|Inc|Ltd|Co|Corp|Gen|Col|Lt|Sgt|Capt|Rev"
    r"|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec|U\.S|U\.K)|\b[A-Z])\.$"
)


@dataclass(frozen=True)
class Passage:
    """A retrieved text and how the answer cites it, best ranked first."""

    text: str
    citation: str


@dataclass(frozen=True)
class AnswerSentence:
    """One sentence of the answer: its text, its citation, its score, where it was read."""

    text: str
    citation: str
    score: float
    passage: int  # the passage's rank (0 = best)
    start: int  # offset in the passage's text


def citation(chunk: Chunk) -> str:
    """How an answer cites a chunk: its id, and the page (PDF page, slide) or section it is in."""
    where = f", p. {chunk.page}" if chunk.page else (f", {chunk.section}" if chunk.section else "")
    return f"{chunk.id}{where}"


def passages_of(chunks: Sequence[Chunk]) -> list[Passage]:
    """Chunks as passages to answer from, in their rank order."""
    return [Passage(c.text, citation(c)) for c in chunks]


def split_sentences(text: str) -> list[tuple[int, int]]:
    """The (start, end) spans of the sentences of `text`, whitespace trimmed, in order."""
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _END.finditer(text):
        if m.group().strip() == "" and "\n\n" not in m.group() and _ABBREV.search(text[start : m.start()]):
            continue  # "Dr. Smith", "J. R. R. Tolkien": the period is not an end
        spans.append((start, m.start()))
        start = m.end()
    spans.append((start, len(text)))
    out = []
    for a, b in spans:
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if len(_WORDS.findall(text, a, b)) >= 2:
            out.append((a, b))
    return out


def _cut(text: str, limit: int) -> str:
    """A sentence longer than the whole budget: cut at a word, marked with an ellipsis."""
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0].rstrip(",;:") + " …"


def extract_answer(
    question: str,
    passages: Sequence[Passage],
    budget: int = BUDGET_CHARS,
    max_sentences: int = MAX_SENTENCES,
    question_vector: Sequence[float] | None = None,
    sentence_vectors: Sequence[Sequence[float]] | None = None,
) -> list[AnswerSentence]:
    """The sentences that best answer `question`, in reading order (passage rank, then place in
    the passage), at most `max_sentences` and `budget` characters together (the best sentence is
    kept even alone over the budget, cut with an ellipsis), each sharing a word with the question
    unless none does. `sentence_vectors`, when given, align with the sentences in that order: every
    passage's `split_sentences`, passage by passage (the services pass none: lexical scoring alone
    is what bench/no_model_answer.py measured, with no embedding call per question)."""
    found = [(i, a, p.text[a:b]) for i, p in enumerate(passages) for a, b in split_sentences(p.text)]
    if not found:
        return []
    words = [set(terms(s)) for _, _, s in found]
    asked = set(terms(question))
    df = {t: sum(t in w for w in words) for t in asked}
    weight = {t: math.log(1 + len(found) / df[t]) if df[t] else 0.0 for t in asked}
    total = sum(weight.values()) or 1.0
    scores, matched = [], []
    for n, ((i, _, _), w) in enumerate(zip(found, words, strict=True)):
        matched.append(bool(asked & w))
        score = sum(weight[t] for t in asked & w) / total + RANK_PRIOR / (1 + i)
        if question_vector is not None and sentence_vectors is not None:
            score += VECTOR_WEIGHT * _cosine(question_vector, sentence_vectors[n])
        scores.append(score)
    kept: list[int] = []
    used, some_match = 0, any(matched)
    for n in sorted(range(len(found)), key=lambda k: -scores[k]):
        length = len(found[n][2]) + 1
        if kept and (len(kept) >= max_sentences or used + length > budget or (some_match and not matched[n])):
            continue
        kept.append(n)
        used += length
    kept.sort(key=lambda k: (found[k][0], found[k][1]))
    return [
        AnswerSentence(_cut(found[k][2], budget), passages[found[k][0]].citation, scores[k], found[k][0], found[k][1])
        for k in kept
    ]


def render_answer(sentences: Sequence[AnswerSentence]) -> str:
    """The answer as text: one line per passage, its sentences, then its citation in brackets."""
    lines: list[tuple[int, str, list[str]]] = []
    for s in sentences:
        if lines and lines[-1][0] == s.passage:
            lines[-1][2].append(" ".join(s.text.split()))
        else:
            lines.append((s.passage, s.citation, [" ".join(s.text.split())]))
    return "\n".join(f"{' '.join(texts)} [{cite}]" for _, cite, texts in lines)


def no_model_answer(prefix: str, question: str, chunks: Sequence[Chunk], passages: int = ANSWER_PASSAGES) -> str:
    """The answer text with no model: `prefix` (saying why), then the extractive answer from the
    best `passages` chunks; the prefix alone when they hold no sentence."""
    found = extract_answer(question, passages_of(chunks[:passages]))
    return f"{prefix}\n{render_answer(found)}" if found else prefix


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0
