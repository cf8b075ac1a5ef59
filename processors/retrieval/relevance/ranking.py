"""Ranking what a store found: a frontier's candidate edges, and entity-search hits.

Every store calls these, so the backends cannot drift apart in how they dedupe and rank.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol, TypeVar

import numpy as np

from processors.retrieval.relevance.fair_share import best
from processors.retrieval.relevance.paths import path_cosine_table
from processors.retrieval.relevance.scoring import edge_scores
from processors.retrieval.relevance.text_match import normalize
from schemas.documents import Chunk
from schemas.graph_rag import SeedEntity
from schemas.retrieval import DocumentRef
from schemas.terms import Term, Triple
from schemas.triples import NeighboursQuery

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

    async def similarities(
        self, user: str, collection: str, vector: Sequence[float], iris: Sequence[str]
    ) -> dict[str, float]:
        """Cosine of `vector` to the stored vector of each of `iris` that has one."""
        ...

    async def vectors(self, user: str, collection: str, iris: Sequence[str]) -> dict[str, list[float]]:
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
    sims = await index.similarities(query.user, query.collection, query.query_vector, keys)
    scores = edge_scores(preds, fars, sims, await _path_sims(preds, via, query, index))
    keep = best(scores, query.max_returned or len(edges), via)
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
    vectors = await index.vectors(query.user, query.collection, wanted)
    rows = [(), *distinct]  # () for entities without a path
    table = path_cosine_table(query.query_vector, rows, columns, vectors).astype(np.float64)
    row_of = {h: i for i, h in enumerate(rows)}
    entity_row = {v: row_of[h] for v, h in heads.items()}
    column_of = {p: j for j, p in enumerate(columns)}
    r = np.fromiter(map(entity_row.__getitem__, via), dtype=np.intp, count=len(via))
    c = np.fromiter(map(column_of.__getitem__, preds), dtype=np.intp, count=len(preds))
    return table[r, c]


class Hit(Protocol):
    """An entity-search hit."""

    @property
    def label(self) -> str: ...

    @property
    def score(self) -> float: ...

    @property
    def lexical(self) -> bool: ...


H = TypeVar("H", bound=Hit)


def rank_entity_hits(hits: Sequence[H], limit: int) -> list[H]:
    """Entities the question names first (longer names first: "marie curie" before "curie"),
    then the nearest by vector; at most `limit`."""
    return sorted(hits, key=lambda h: (not h.lexical, -len(h.label) if h.lexical else 0, -h.score))[:limit]


def documents_of(chunks: Sequence[Chunk]) -> list[DocumentRef]:
    """The distinct documents of ranked chunks, in the order their best chunk comes."""
    out: dict[str, DocumentRef] = {}
    for c in chunks:
        if c.document_id not in out:
            out[c.document_id] = DocumentRef(id=c.document_id, title=c.title, score=c.score or 0.0)
    return list(out.values())


def choose_anchors(seeds: list[SeedEntity]) -> list[str]:
    """Where traversal starts: the entities the question names, longest mention first, without
    those named only inside a longer mention ("austria" in "archduke johann of austria");
    the most similar entities when the question names none."""
    named = [e for e in seeds if e.lexical and e.label]
    if not named:
        return [e.id for e in seeds]
    names = [f" {normalize(e.label or '')} " for e in named]
    return [e.id for e, n in zip(named, names, strict=True) if not any(n != other and n in other for other in names)]
