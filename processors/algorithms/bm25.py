"""Okapi BM25 over a fixed set of texts, as an in-memory inverted index (pure numpy).

Statistics (document frequencies, average length) come from the indexed texts only, so an
index built per collection ranks a tenant's chunks by that tenant's own statistics.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import numpy as np
import Stemmer

from processors.algorithms.text_match import STOPWORDS

_WORD = re.compile(r"[0-9a-z\u00c0-\uffff]+")
K1, B = 1.2, 0.75


_STEMMER = Stemmer.Stemmer("english")  # Snowball: "albums" finds "album", "studies" "study"


def terms(text: str) -> list[str]:
    """Lexical terms of `text`: lower-case words without stopwords, Snowball-stemmed."""
    return _STEMMER.stemWords([w for w in _WORD.findall(text.lower()) if w not in STOPWORDS])


class Bm25Index:
    """Postings per term (rows and term frequencies) and row lengths. Statistics are computed at
    query time over the rows searched, so a search of a subset (a scope) ranks exactly as an
    index of that subset alone would."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.size = len(texts)
        docs = [Counter(terms(t)) for t in texts]
        self.lengths = np.array([sum(d.values()) for d in docs], dtype=np.float32)
        rows: dict[str, list[int]] = {}
        freqs: dict[str, list[int]] = {}
        for i, d in enumerate(docs):
            for term, tf in d.items():
                rows.setdefault(term, []).append(i)
                freqs.setdefault(term, []).append(tf)
        self._postings = {
            t: (np.asarray(r, dtype=np.int64), np.asarray(freqs[t], dtype=np.float32)) for t, r in rows.items()
        }

    def scores(self, query: str, mask: np.ndarray | None = None) -> np.ndarray:
        """BM25 score of every row for `query` with the statistics of the rows in `mask` (all rows
        when None); rows outside the mask score 0."""
        out = np.zeros(self.size, dtype=np.float32)
        n = self.size if mask is None else int(mask.sum())
        if n == 0:
            return out
        avg = float(self.lengths.mean() if mask is None else self.lengths[mask].mean()) or 1.0
        for term in set(terms(query)):
            posting = self._postings.get(term)
            if posting is None:
                continue
            rows, tf = posting
            if mask is not None:
                keep = mask[rows]
                rows, tf = rows[keep], tf[keep]
            if len(rows) == 0:
                continue
            idf = np.log(1 + (n - len(rows) + 0.5) / (len(rows) + 0.5))
            norm = K1 * (1 - B + B * self.lengths[rows] / avg)
            out[rows] += idf * tf * (K1 + 1) / (tf + norm)
        return out
