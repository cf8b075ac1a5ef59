"""Relevance of candidate edges to a question, from stored label embeddings (pure numpy)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

PREDICATE_WEIGHT = 0.9  # the relation carries most of a multi-hop question's meaning


def edge_scores(
    query: Sequence[float],
    edges: Sequence[tuple[str, str]],
    vectors: Mapping[str, Sequence[float]],
) -> list[float]:
    """Score each (predicate, far end) pair: weighted cosine of the question to both labels.

    Vectors are unit length (the embedder normalizes), so a dot product is the cosine;
    a missing vector (e.g. a literal) contributes 0.
    """
    q = np.asarray(query, dtype=np.float32)
    q = q / (np.linalg.norm(q) or 1.0)
    cache: dict[str, float] = {}

    def sim(key: str) -> float:
        if key not in cache:
            v = vectors.get(key)
            cache[key] = float(np.dot(q, np.asarray(v, dtype=np.float32))) if v is not None else 0.0
        return cache[key]

    return [PREDICATE_WEIGHT * sim(p) + (1 - PREDICATE_WEIGHT) * sim(far) for p, far in edges]


def best(scores: Sequence[float], limit: int, groups: Sequence[str] | None = None) -> list[int]:
    """Indices of the `limit` best scores, best first (stable for ties).

    With `groups` (the frontier entity each edge was found from), every group first gets
    a fair share of the budget before the rest goes to the best leftovers, so one hub's
    thousands of similar edges cannot crowd out the other entities' edges.
    """
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    if groups is None or limit >= len(order):
        return order[:limit]
    share = max(2, -(-limit // max(1, len(set(groups)))))
    taken: dict[str, int] = {}
    first: list[int] = []
    rest: list[int] = []
    for i in order:
        g = groups[i]
        if taken.get(g, 0) < share and len(first) < limit:
            taken[g] = taken.get(g, 0) + 1
            first.append(i)
        else:
            rest.append(i)
    return first + rest[: limit - len(first)]  # fair shares first, so a caller's truncation keeps them
