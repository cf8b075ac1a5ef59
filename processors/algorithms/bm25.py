"""Okapi BM25 (pure): the lexical terms of a text, and the scores of chunks for a query from the
statistics a store keeps per collection."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import Stemmer

from processors.algorithms.text_match import STOPWORDS

_WORD = re.compile(r"[0-9a-z\u00c0-\uffff]+")
K1, B = 1.2, 0.75


_STEMMER = Stemmer.Stemmer("english")  # Snowball: "albums" finds "album", "studies" "study"


def terms(text: str) -> list[str]:
    """Lexical terms of `text`: lower-case words without stopwords, Snowball-stemmed."""
    return _STEMMER.stemWords([w for w in _WORD.findall(text.lower()) if w not in STOPWORDS])


@dataclass(frozen=True)
class Bm25Stats:
    """A collection's BM25 statistics, as its store keeps them: chunks, their total term count,
    and the chunks holding each term of a query."""

    chunks: int
    total_terms: int
    df: Mapping[str, int]


def bm25(chunk_terms: Sequence[Sequence[str]], query_terms: Sequence[str], stats: Bm25Stats) -> list[float]:
    """Okapi BM25 of each chunk (its terms) for the query's terms, with the collection's
    statistics: a tenant's chunks rank by that tenant's own statistics, whoever else shares the
    store's full-text index."""
    n = max(stats.chunks, 1)
    avg = (stats.total_terms / n) or 1.0
    idf = {
        t: math.log(1 + (n - stats.df.get(t, 0) + 0.5) / (stats.df.get(t, 0) + 0.5)) for t in dict.fromkeys(query_terms)
    }
    out = []
    for words in chunk_terms:
        tf = Counter(words)
        norm = K1 * (1 - B + B * len(words) / avg)
        out.append(sum(idf[t] * tf[t] * (K1 + 1) / (tf[t] + norm) for t in idf if tf[t]))
    return out


def best_bm25(
    hits: Sequence[tuple[str, list[str]]], terms: Sequence[str], stats: Bm25Stats, k: int
) -> dict[str, float]:
    """The `k` best of the full-text hits (chunk id, its terms) by BM25 with the collection's own
    statistics (the index's are every collection's), best first."""
    scores = bm25([words for _, words in hits], terms, stats)
    ranked = sorted(zip((i for i, _ in hits), scores, strict=True), key=lambda x: (-x[1], x[0]))
    return {i: s for i, s in ranked[:k] if s > 0}
