"""Nearest rows of a matrix of unit vectors to a unit query (pure numpy).

Exact search reads the whole matrix per query (60k × 384 floats: 92 MB, about 3 ms), so it
grows with the graph. `ProjectedIndex` reads a low-dimensional projection instead and scores
only its best candidates exactly, which keeps a question's seed search nearly flat in the
number of entities.
"""

from __future__ import annotations

import numpy as np


def nearest(matrix: np.ndarray, q: np.ndarray, limit: int) -> tuple[list[int], list[float]]:
    """Rows of the `limit` largest cosines to unit `q`, best first (exact)."""
    sims = matrix @ q
    k = min(limit, len(sims))
    if k <= 0:
        return [], []
    top = np.argpartition(-sims, k - 1)[:k]
    top = top[np.argsort(-sims[top], kind="stable")]
    return top.tolist(), sims[top].tolist()


class ProjectedIndex:
    """Candidates by dot product in the matrix's top principal subspace (uncentred, so dot
    products are what it keeps best), then exact cosine on `candidates` of them.

    Approximate: a true neighbour is missed only when its projection ranks below the
    candidate cut. On the 1M-triple benchmark graph (60k MiniLM vectors) the defaults keep
    99.9 % of the exact top 50 and take 1.1 ms instead of 2.8.
    """

    def __init__(self, matrix: np.ndarray, dims: int = 128, candidates: int = 2000, sample: int = 20_000) -> None:
        self.matrix = matrix
        self.candidates = candidates
        rows = matrix if len(matrix) <= sample else matrix[np.random.default_rng(0).choice(len(matrix), sample, False)]
        second_moment = rows.T @ rows / max(1, len(rows))
        _, vectors = np.linalg.eigh(second_moment)  # ascending eigenvalues
        self.basis = np.ascontiguousarray(vectors[:, ::-1][:, :dims], dtype=np.float32)
        self.projected = np.ascontiguousarray(matrix @ self.basis, dtype=np.float32)

    def nearest(self, q: np.ndarray, limit: int) -> tuple[list[int], list[float]]:
        """Rows of (nearly) the `limit` largest cosines to unit `q`, best first."""
        want = max(self.candidates, 20 * limit)
        if want >= len(self.matrix):
            return nearest(self.matrix, q, limit)
        coarse = self.projected @ (q @ self.basis)
        cand = np.argpartition(-coarse, want - 1)[:want]
        rows, sims = nearest(self.matrix[cand], q, limit)
        return cand[rows].tolist(), sims
