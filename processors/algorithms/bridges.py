"""Query-side bridge detection without a model (pure): the names a retrieved passage gives that a
multi-hop question needs next.

A multi-hop question describes one thing to reach another ("the first president of the
association which published the Journal of Psychotherapy Integration"): the first passage found
names the bridge ("... published by the American Psychological Association"), and the next
passage is the one about that name. So, from a passage the question found:

1. Its names: runs of capitalised words (with "of", "the", "de" ... inside), a sentence's first
   word only when it is not a common word; the names the question already says are left out.
2. Each name scores by its sentence: the question's terms that sentence holds (the sentence
   that matches the question's description is the one naming what it leads to), then by
   position.
3. The follow-up query: the name and the question's terms the passage does not hold (what is
   still to be found: "first president").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from processors.algorithms.bm25 import terms as bm25_terms
from processors.algorithms.text_match import MAX_NAME_WORDS, STOPWORDS, normalize

# How a follow-up ranking fuses with the question's (`fuse`), chosen on the tuning halves of the
# public doc-QA sets (bench/README.md, "Stronger signals").
FUSION_K = 3.0
FOLLOW_WEIGHT = 0.25
SEED_DECAY = 0.5
KEEP_FIRST = 1
# A sentence ends at . ! or ? before a capital, digit or quote, but not after an initial ("J. R. Gold").
_SENTENCE = re.compile(r"(?<=[.!?])(?<!\b[A-Z]\.)\s+(?=[A-Z0-9\"'(])")
_TOKEN = re.compile(r"\w[\w'’\-.]*\w|\w|[^\w\s]")  # words, and each punctuation mark (it ends a name)
# Lower-case words allowed inside a name ("Journal of Psychotherapy Integration", "Leonardo da Vinci").
_JOINERS = frozenset("of the de da di del della der van von la le du for".split())


@dataclass(frozen=True)
class Bridge:
    """A name a passage gives, and the follow-up query that looks for the passage about it."""

    name: str
    query: str
    score: float


def sentences(text: str) -> list[str]:
    """`text` cut at sentence ends (a full stop, ! or ? before a capital, digit or quote)."""
    return [s for s in _SENTENCE.split(text.strip()) if s]


def names(sentence: str) -> list[str]:
    """The capitalised word runs of one sentence (see the module docstring), in order."""
    words = _TOKEN.findall(sentence)
    out: list[str] = []
    run: list[str] = []

    def close() -> None:
        while run and run[-1].lower() in _JOINERS:
            run.pop()
        if run:
            out.append(" ".join(run[:MAX_NAME_WORDS]))
        run.clear()

    for i, w in enumerate(words):
        if _capitalised(w) and not (i == 0 and w.lower() in STOPWORDS):
            run.append(w)
        elif run and w.lower() in _JOINERS:
            run.append(w)
        else:
            close()
    close()
    return [n for n in out if any(ch.isalpha() for ch in n)]


def _capitalised(word: str) -> bool:
    """A word that starts with a capital: "Curie", "McCartney", "NASA" (not "I" or "A")."""
    return word[0].isupper() and (len(word) > 1 or not word.isalpha())


def bridges(question: str, passage: str, limit: int, best_sentences: int = 0) -> list[Bridge]:
    """The best `limit` bridges of `passage` for `question`: names the question does not say,
    best first (by the question terms their sentence holds, then by position). With
    `best_sentences`, only the names of that many sentences, those holding the most question
    terms (the evidence the passage was found by links onward, not the rest of the passage)."""
    said = f" {normalize(question)} "
    wanted = set(bm25_terms(question))
    held = set(bm25_terms(passage))
    residual = " ".join(dict.fromkeys(w for w in normalize(question).split() if w not in STOPWORDS
                                      and not (set(bm25_terms(w)) & held)))  # fmt: skip
    found: dict[str, Bridge] = {}
    position = 0
    scored = [(len(wanted & set(bm25_terms(s))), s) for s in sentences(passage)]
    if best_sentences:
        kept = sorted(range(len(scored)), key=lambda i: -scored[i][0])[:best_sentences]  # stable: earlier first
        scored = [scored[i] for i in sorted(kept)]
    for overlap, s in scored:
        for name in names(s):
            key = normalize(name)
            position += 1
            if not key or f" {key} " in said or key in found or all(w in STOPWORDS for w in key.split()):
                continue
            score = overlap - 0.01 * position
            found[key] = Bridge(name, f"{name} {residual}".strip(), score)
    return sorted(found.values(), key=lambda b: -b.score)[:limit]


def fuse(
    first: Sequence[str],
    follow_ups: Sequence[tuple[int, Sequence[str]]],
    k: float = FUSION_K,
    weight: float = FOLLOW_WEIGHT,
    decay: float = SEED_DECAY,
    keep: int = KEEP_FIRST,
    weighted: Sequence[tuple[float, Sequence[str]]] = (),
) -> list[tuple[str, float]]:
    """`first` (the question's ranking) fused with the follow-up rankings, each of the seed of
    rank `seed` (0 the best): an item scores 1 / (k + rank) in `first`, plus weight · decay^seed /
    (k + rank) in each follow-up that holds it (ranks from 1), plus w / (k + rank) in each of the
    `weighted` (w, ranking). Best first, but the first `keep` of `first` stay first (the
    question's own best match: the follow-ups start from it); ties keep the order items were
    first seen in."""
    score = {c: 1.0 / (k + r) for r, c in enumerate(first, 1)}
    added = [(weight * decay**seed, ranking) for seed, ranking in follow_ups]
    for w, ranking in [*added, *weighted]:
        for r, c in enumerate(ranking, 1):
            score[c] = score.get(c, 0.0) + w / (k + r)
    head = list(dict.fromkeys(first[:keep]))
    rest = sorted((kv for kv in score.items() if kv[0] not in head), key=lambda kv: -kv[1])  # stable: ties in order
    top = max(score.values(), default=0.0)
    return [(c, top + len(head) - i) for i, c in enumerate(head)] + rest
