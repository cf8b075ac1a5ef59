"""Relevance of candidate edges to a question, from stored label embeddings (pure numpy)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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


def combine(
    edges: Sequence[tuple[str, str | None]],
    sims: Mapping[str, float],
    relation_sims: Sequence[float] | None = None,
) -> list[float]:
    """Score each (predicate, far end) pair from the question's cosine to both labels (or to
    the relation's path, `relation_sims`); a missing similarity (no vector, or a literal far
    end given as None) contributes 0."""
    w, get = PREDICATE_WEIGHT, sims.get
    rel = relation_sims if relation_sims is not None else [get(p, 0.0) for p, _ in edges]
    far_sims = [get(far, 0.0) if far is not None else 0.0 for _, far in edges]
    return [w * r + (1 - w) * f for r, f in zip(rel, far_sims, strict=True)]
