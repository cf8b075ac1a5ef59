"""Scoring a hop's candidate edges against a question, as every store does (bus-free).

An edge is scored from the question's cosine to its relation's label (or to the path of relations
that led to the frontier entity, continued by it) and to its far end's label, from label vectors
stored at load time; a hop keeps the best with a fair share per frontier entity. Every store calls
`rank_neighbours`, so the backends cannot drift apart in how they dedupe and rank.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import repeat
from typing import Protocol

import numpy as np

from schemas.tenant import Tenant
from schemas.terms import Term, Triple
from schemas.triples import NeighboursQuery

PREDICATE_WEIGHT = 0.9  # the relation carries most of a multi-hop question's meaning


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


def _lookup(sims: Mapping[str, float], keys: Sequence[str | None]) -> np.ndarray:
    """The similarity of each key (0 for a key without one, or None) as float64."""
    return np.fromiter(map(sims.get, keys, repeat(0.0)), dtype=np.float64, count=len(keys))  # type: ignore[arg-type]


def best_edges(scores: Sequence[float], limit: int, groups: Sequence[str] | None = None) -> list[int]:
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


# An edge as a store row: (s, p, o, o is a literal (truthy), o datatype or "", o language or "").
RawEdge = tuple[str, str, str, int | bool, str, str]


@dataclass
class NeighbourResult:
    """Edges found for a frontier, with the relevance score of each (None when unscored)."""

    triples: list[Triple]
    scores: list[float | None]
    rows_read: int


# Terms are immutable, so the IRIs a graph's hops keep meeting (its hubs and predicates) are built once.
_iri = lru_cache(maxsize=16384)(Term.iri)


def edge_triple(e: RawEdge) -> Triple:
    """The wire triple of a raw edge (built only for edges that are kept: hubs yield thousands)."""
    s, p, o, lit, dt, lang = e
    obj = Term.literal(o, dt or None, lang or None) if lit else _iri(o)
    return Triple(s=_iri(s), p=_iri(p), o=obj)


class LabelVectors(Protocol):
    """The stored label vectors edges are scored from (an entity index)."""

    async def similarities(self, tenant: Tenant, vector: Sequence[float], iris: Sequence[str]) -> dict[str, float]:
        """Cosine of `vector` to the stored vector of each of `iris` that has one."""
        ...

    async def vectors(self, tenant: Tenant, iris: Sequence[str]) -> dict[str, list[float]]:
        """Stored vectors of these IRIs."""
        ...


async def rank_neighbours(
    found: Iterable[tuple[RawEdge, str]], rows_read: int, query: NeighboursQuery, index: LabelVectors | None
) -> NeighbourResult:
    """`found` holds (raw edge, frontier entity it was found from) in store order (out-edges first).

    The first finder of an edge wins. With a query vector and an entity index, each edge is
    scored on the question's similarity to its relation and far-end labels (an entity with a
    path in `query.paths`, the relations that led to it, has its edges' relations scored as
    that path's continuation) and the best `query.max_returned` are kept with a fair share per
    frontier entity; otherwise all edges come back unscored.
    """
    first: dict[RawEdge, str] = {}
    for e, entity in found:
        first.setdefault(e, entity)
    edges = list(first)
    if query.query_vector is None or index is None:
        return NeighbourResult([edge_triple(e) for e in edges], [None] * len(edges), rows_read)
    via = list(first.values())
    preds = [e[1] for e in edges]
    # the far end of an edge is the end that is not the frontier entity (None: a literal)
    fars = [(None if e[3] else e[2]) if e[0] == v else e[0] for e, v in zip(edges, via, strict=True)]
    keys = list({*preds, *fars} - {None})
    sims = await index.similarities(query.tenant, query.query_vector, keys)
    scores = edge_scores(preds, fars, sims, await _path_sims(preds, via, query, index))
    keep = best_edges(scores, query.max_returned or len(edges), via)
    return NeighbourResult([edge_triple(edges[i]) for i in keep], scores[keep].tolist(), rows_read)


async def _path_sims(
    preds: Sequence[str], via: Sequence[str], query: NeighboursQuery, index: LabelVectors
) -> np.ndarray | None:
    """Per edge, the question's cosine to its relation continuing the path to its frontier
    entity (None when no frontier entity has a path: the relation is scored alone)."""
    paths: Mapping[str, Sequence[str]] = query.paths
    heads = {v: tuple(paths.get(v, ())) for v in dict.fromkeys(via)} if paths else {}
    distinct = sorted({h for h in heads.values() if h})
    if not distinct or query.query_vector is None:
        return None
    columns = sorted(set(preds))
    wanted = sorted({x for h in distinct for x in h} | set(columns))
    vectors = await index.vectors(query.tenant, wanted)
    rows = [(), *distinct]  # () for entities without a path
    table = path_cosine_table(query.query_vector, rows, columns, vectors).astype(np.float64)
    row_of = {h: i for i, h in enumerate(rows)}
    entity_row = {v: row_of[h] for v, h in heads.items()}
    column_of = {p: j for j, p in enumerate(columns)}
    r = np.fromiter(map(entity_row.__getitem__, via), dtype=np.intp, count=len(via))
    c = np.fromiter(map(column_of.__getitem__, preds), dtype=np.intp, count=len(preds))
    return table[r, c]
