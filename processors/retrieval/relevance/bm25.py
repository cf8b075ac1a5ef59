"""Okapi BM25 over a fixed set of texts, as an in-memory inverted index (pure numpy).

Statistics (document frequencies, average length) come from the indexed texts only, so an
index built per collection ranks a tenant's chunks by that tenant's own statistics.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

from processors.retrieval.relevance.text_match import STOPWORDS

_WORD = re.compile(r"[0-9a-z\u00c0-\uffff]+")
K1, B = 1.2, 0.75


def _stem(word: str) -> str:
    """A light English suffix strip, so "albums" finds "album" and "studies" finds "study"."""
    for suffix, keep in (("ies", "y"), ("sses", "ss"), ("es", "e"), ("s", ""), ("ing", ""), ("ed", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            return word[: -len(suffix)] + keep
    return word


def terms(text: str) -> list[str]:
    """Lexical terms of `text`: lower-case words without stopwords, lightly stemmed."""
    return [_stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


class Bm25Index:
    """Postings per term: the rows that contain it and their BM25 term weight."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.size = len(texts)
        docs = [Counter(terms(t)) for t in texts]
        lengths = np.array([sum(d.values()) for d in docs], dtype=np.float32)
        avg = float(lengths.mean()) if self.size else 1.0
        rows: dict[str, list[int]] = {}
        freqs: dict[str, list[int]] = {}
        for i, d in enumerate(docs):
            for term, tf in d.items():
                rows.setdefault(term, []).append(i)
                freqs.setdefault(term, []).append(tf)
        norm = K1 * (1 - B + B * lengths / (avg or 1.0))
        self._postings: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for term, r in rows.items():
            idx = np.asarray(r, dtype=np.int64)
            tf = np.asarray(freqs[term], dtype=np.float32)
            idf = np.log(1 + (self.size - len(idx) + 0.5) / (len(idx) + 0.5))
            self._postings[term] = (idx, (idf * tf * (K1 + 1) / (tf + norm[idx])).astype(np.float32))

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every indexed text for `query` (0 where no term matches)."""
        out = np.zeros(self.size, dtype=np.float32)
        for term in set(terms(query)):
            posting = self._postings.get(term)
            if posting is not None:
                out[posting[0]] += posting[1]
        return out
