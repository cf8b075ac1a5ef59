"""Vector similarity (pure numpy): cosines of a query to stored vectors, the best k of scored rows,
int8 quantisation, and the k-means the inverted-list indexes (stores/sqlite/vector_lists.py) train.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


def cosines(query: Sequence[float], iris: Sequence[str], vectors: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """Cosine of `query` to the vector of each IRI that has one (one matrix product)."""
    known = [i for i in dict.fromkeys(iris) if i in vectors]
    if not known:
        return {}
    q = np.asarray(query, dtype=np.float32)
    m = np.asarray([vectors[i] for i in known], dtype=np.float32)
    norms = np.linalg.norm(m, axis=1)
    sims = (m @ q) / (np.where(norms == 0, 1.0, norms) * (float(np.linalg.norm(q)) or 1.0))
    return dict(zip(known, sims.tolist(), strict=True))


def top_k(scores: np.ndarray, k: int, mask: np.ndarray | None = None) -> np.ndarray:
    """Rows of the `k` best finite scores (among `mask`), best first; a tie, at the cut too, goes to
    the lower row."""
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    k = min(k, int(np.isfinite(scores).sum()))
    if k <= 0:
        return np.zeros(0, np.int64)
    kth = np.partition(-scores, k - 1)[k - 1]  # minus the k-th best score
    rows = np.flatnonzero(-scores <= kth)  # every row as good, so a tie at the cut goes to the lower row
    return rows[np.lexsort((rows, -scores[rows]))][:k]


def unit_rows(m: np.ndarray) -> np.ndarray:
    """The rows of `m` scaled to unit length (a zero row stays zero), as float32; a float input is
    divided in its own precision, an integer one (int8 codes) in float32."""
    floating = np.issubdtype(m.dtype, np.floating)
    out = m if floating else m.astype(np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    if floating:
        return (out / norms).astype(np.float32, copy=False)
    out /= norms  # in place (ours): a resident copy's build converts a million int8 rows, a block at a time
    return out


def quantize(unit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows as int8 codes (each row's peak at ±127: a quarter of float32's bytes) and a scale each,
    chosen so that scale * code is a unit vector: its dot product with a unit query is the cosine
    of the dequantised row (never above 1, the same whether searched or looked up)."""
    peak = np.abs(unit).max(axis=1)
    codes = np.clip(np.rint(unit * (127.0 / np.where(peak == 0, 1.0, peak))[:, None]), -127, 127).astype(np.int8)
    norms = np.linalg.norm(codes.astype(np.float32), axis=1)  # 0, or at least 1 (integer codes)
    return (1.0 / np.maximum(norms, 1.0)).astype(np.float32), codes


def nearest_rows(unit: np.ndarray, centroids: np.ndarray, block: int = 65536) -> np.ndarray:
    """Each row's most similar centroid (computed a block of rows at a time)."""
    out = np.empty(len(unit), dtype=np.int64)
    for i in range(0, len(unit), block):
        out[i : i + block] = np.argmax(unit[i : i + block] @ centroids.T, axis=1)
    return out


def kmeans(unit: np.ndarray, k: int, seed: int = 0, iterations: int = 15) -> tuple[np.ndarray, np.ndarray]:
    """Spherical k-means of unit rows: (k unit centroids, each row's centroid), seeded k-means++."""
    n = len(unit)
    k = max(1, min(k, n))
    rng = np.random.default_rng(seed)
    centroids = [unit[rng.integers(n)]]
    closest = 1.0 - unit @ centroids[0]
    for _ in range(1, k):  # k-means++: far rows are likelier next centroids
        weights = np.clip(closest, 0.0, None)
        total = weights.sum()
        pick = rng.integers(n) if total <= 0 else rng.choice(n, p=weights / total)
        centroids.append(unit[pick])
        closest = np.minimum(closest, 1.0 - unit @ unit[pick])
    c = np.stack(centroids).astype(np.float32)
    labels = np.zeros(n, dtype=np.int64)
    for _ in range(iterations):
        labels = nearest_rows(unit, c)
        for j in range(k):
            members = unit[labels == j]
            if len(members):
                mean = members.sum(axis=0)
                c[j] = mean / (np.linalg.norm(mean) or 1.0)
    return c, nearest_rows(unit, c)
