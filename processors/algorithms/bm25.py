"""Okapi BM25 (pure): the lexical terms of a text, and the scores of chunks for a query from the
statistics a store keeps per collection."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import regex
import Stemmer

from processors.algorithms.text_match import STOPWORDS, fold

K1, B = 1.2, 0.75
# A term is a word of a script written with spaces, or a run of a script written without them
# (Chinese, Japanese, Korean, Thai, Lao, Khmer, Myanmar), which the latter then splits.
_SCRIPTS = "".join(
    rf"\p{{scx={s}}}" for s in ("Han", "Hiragana", "Katakana", "Hangul", "Thai", "Lao", "Khmer", "Myanmar")
)
_UNSPACED = rf"[[\p{{L}}\p{{N}}]&&[{_SCRIPTS}]]"  # letters and digits only: "·" is of these scripts too
_UNSPACED_MORE = rf"[[\p{{L}}\p{{M}}\p{{N}}]&&[{_SCRIPTS}\p{{M}}]]"
_PART = regex.compile(
    rf"(?V1){_UNSPACED}{_UNSPACED_MORE}*|[[\p{{L}}\p{{N}}]--{_UNSPACED}][[\p{{L}}\p{{M}}\p{{N}}]--{_UNSPACED}]*"
)
_UNSPACED_START = regex.compile(rf"(?V1){_UNSPACED}")
_CHARACTER = regex.compile(r"\X")  # a user-perceived character: a letter with its marks
# What _PART finds in ASCII text (no marks, no script written without spaces), found in a fifth of
# the time: most stored text is ASCII, and terms were most of a document write (issue 38).
_ASCII_PART = re.compile(r"[A-Za-z0-9]+")

_STEMMER = Stemmer.Stemmer("english")  # Snowball: "albums" finds "album", "studies" "study"
# Distinct terms of a question a store searches: a full-text engine caps a query's clauses
# (Lucene at 1024), and a question's first terms say what it asks.
MAX_QUERY_TERMS = 256


def terms(text: str) -> list[str]:
    """Lexical terms of `text`: lower-case words without stopwords, Snowball-stemmed; a run of a
    script written without spaces becomes its overlapping character pairs ("谁拍摄了照片" ->
    "谁拍", "拍摄", ... "照片"), which no word tokenizer would split, so any word of it is found."""
    folded = fold(text)
    if folded.isascii():
        return _STEMMER.stemWords([w for w in _ASCII_PART.findall(folded) if w not in STOPWORDS])
    words: list[str] = []
    pairs: list[str] = []
    for part in _PART.findall(folded):
        if not part[0].isascii() and _UNSPACED_START.match(part):
            chars = _CHARACTER.findall(part)
            pairs += [part] if len(chars) == 1 else [a + b for a, b in zip(chars, chars[1:], strict=False)]
        elif part not in STOPWORDS:
            words.append(part)
    return _STEMMER.stemWords(words) + pairs


def query_terms(words: Sequence[str]) -> list[str]:
    """The distinct terms of a question a store searches, in order, at most MAX_QUERY_TERMS."""
    return list(dict.fromkeys(w for w in words if w.strip()))[:MAX_QUERY_TERMS]


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
