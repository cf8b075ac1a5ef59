"""Relevance of candidate edges to a question, from stored label embeddings (pure numpy)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import repeat

import numpy as np

PREDICATE_WEIGHT = 0.9  # the relation carries most of a multi-hop question's meaning


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


def edge_scores(
    predicates: Sequence[str],
    far_ends: Sequence[str | None],
    sims: Mapping[str, float],
    relation_sims: Sequence[float] | None = None,
) -> np.ndarray:
    """Score each edge (its predicate, its far end) from the question's cosine to both labels (or
    to the relation's path, `relation_sims`), as float64; a missing similarity (no vector, or a
    literal far end given as None) contributes 0."""
    rel = _lookup(sims, predicates) if relation_sims is None else np.asarray(relation_sims, dtype=np.float64)
    return PREDICATE_WEIGHT * rel + (1 - PREDICATE_WEIGHT) * _lookup(sims, far_ends)


def combine(
    edges: Sequence[tuple[str, str | None]],
    sims: Mapping[str, float],
    relation_sims: Sequence[float] | None = None,
) -> list[float]:
    """`edge_scores` of (predicate, far end) pairs, as a list."""
    return edge_scores([p for p, _ in edges], [f for _, f in edges], sims, relation_sims).tolist()


def _lookup(sims: Mapping[str, float], keys: Sequence[str | None]) -> np.ndarray:
    """The similarity of each key (0 for a key without one, or None) as float64."""
    return np.fromiter(map(sims.get, keys, repeat(0.0)), dtype=np.float64, count=len(keys))  # type: ignore[arg-type]
