"""Path continuation: a relation scored as the next step of the relations that led to an entity."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


def path_cosine_table(
    query: Sequence[float],
    paths: Sequence[tuple[str, ...]],
    predicates: Sequence[str],
    vectors: Mapping[str, Sequence[float]],
) -> np.ndarray:
    """Cosine of the question to each path extended by each predicate (rows: `paths`, columns:
    `predicates`), the path's relations standing for the sum of their label vectors.

    A multi-hop question names each relation of its path once, so after "parent of" the
    relation that completes the question ("born in") scores above "parent of" again.
    """
    if not paths or not predicates:
        return np.zeros((len(paths), len(predicates)), dtype=np.float32)
    q = np.asarray(query, dtype=np.float32)
    q = q / (np.linalg.norm(q) or 1.0)
    dim = len(q)

    def vec(iri: str) -> np.ndarray:
        v = vectors.get(iri)
        return np.asarray(v, dtype=np.float32) if v is not None else np.zeros(dim, dtype=np.float32)

    heads = np.stack([sum((vec(x) for x in path), np.zeros(dim, dtype=np.float32)) for path in paths])
    tails = np.stack([vec(p) for p in predicates])
    # |h + t|² = |h|² + |t|² + 2 h·t, for every (path, predicate) pair at once
    norms = np.sqrt(np.maximum((heads * heads).sum(1)[:, None] + (tails * tails).sum(1)[None, :]
                               + 2 * heads @ tails.T, 0.0))  # fmt: skip
    return ((heads @ q)[:, None] + (tails @ q)[None, :]) / np.where(norms == 0, 1.0, norms)


def path_cosines(
    query: Sequence[float],
    paths: Sequence[tuple[str, ...]],
    predicates: Sequence[str],
    vectors: Mapping[str, Sequence[float]],
) -> dict[tuple[tuple[str, ...], str], float]:
    """`path_cosine_table` keyed by (path, predicate)."""
    if not paths or not predicates:
        return {}
    sims = path_cosine_table(query, paths, predicates, vectors)
    return {(path, p): float(sims[i, j]) for i, path in enumerate(paths) for j, p in enumerate(predicates)}
