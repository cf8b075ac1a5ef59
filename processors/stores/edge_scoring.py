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


def path_cosines(
    query: Sequence[float],
    paths: Sequence[tuple[str, ...]],
    predicates: Sequence[str],
    vectors: Mapping[str, Sequence[float]],
) -> dict[tuple[tuple[str, ...], str], float]:
    """Cosine of the question to each path extended by each predicate, the path's relations
    standing for the sum of their label vectors.

    A multi-hop question names each relation of its path once, so after "parent of" the
    relation that completes the question ("born in") scores above "parent of" again.
    """
    if not paths or not predicates:
        return {}
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
    sims = ((heads @ q)[:, None] + (tails @ q)[None, :]) / np.where(norms == 0, 1.0, norms)
    return {(path, p): float(sims[i, j]) for i, path in enumerate(paths) for j, p in enumerate(predicates)}


def edge_scores(
    query: Sequence[float],
    edges: Sequence[tuple[str, str | None]],
    vectors: Mapping[str, Sequence[float]],
) -> list[float]:
    """Score each (predicate, far end) pair: weighted cosine of the question to both labels."""
    keys = [p for p, _ in edges] + [f for _, f in edges if f is not None]
    return combine(edges, cosines(query, keys, vectors))


def best(scores: Sequence[float], limit: int, groups: Sequence[str] | None = None) -> list[int]:
    """Indices of the `limit` best scores, best first (stable for ties).

    With `groups` (the frontier entity each edge was found from), every group first gets
    a fair share of the budget before the rest goes to the best leftovers, so one hub's
    thousands of similar edges cannot crowd out the other entities' edges.
    """
    s = np.asarray(scores, dtype=np.float64)
    order = np.argsort(-s, kind="stable")
    if groups is None or limit >= len(order):
        return order[:limit].tolist()
    ids: dict[str, int] = {}
    g = np.fromiter((ids.setdefault(x, len(ids)) for x in groups), dtype=np.int64, count=len(groups))[order]
    share = max(2, -(-limit // max(1, len(ids))))
    # rank of each edge within its group, in score order
    by_group = np.argsort(g, kind="stable")
    sorted_g = g[by_group]
    starts = np.flatnonzero(np.r_[True, sorted_g[1:] != sorted_g[:-1]])
    run = np.arange(len(g)) - np.repeat(starts, np.diff(np.r_[starts, len(g)]))
    rank = np.empty(len(g), dtype=np.int64)
    rank[by_group] = run
    fair = rank < share
    first = order[fair][:limit]
    rest = order[~fair][: limit - len(first)]
    return np.concatenate([first, rest]).tolist()  # fair shares first, so a caller's truncation keeps them
