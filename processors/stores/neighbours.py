"""What every store does with a frontier's raw edges: dedupe, then (optionally) score and keep
the best. One implementation, so the backends cannot drift apart."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from processors.stores.edge_scoring import best, edge_scores
from processors.stores.protocol import EntityIndex, NeighbourResult
from schemas.terms import Term, Triple

# An edge as a store row: (s, p, o, o is a literal, o datatype or "", o language or "").
RawEdge = tuple[str, str, str, bool, str, str]


def edge_triple(e: RawEdge) -> Triple:
    """The wire triple of a raw edge (built only for edges that are kept: hubs yield thousands)."""
    s, p, o, lit, dt, lang = e
    obj = Term.literal(o, dt or None, lang or None) if lit else Term.iri(o)
    return Triple(s=Term.iri(s), p=Term.iri(p), o=obj)


async def rank_neighbours(
    found: Iterable[tuple[RawEdge, str]],
    rows_read: int,
    query_vector: Sequence[float] | None,
    edge_limit: int | None,
    index: EntityIndex | None,
    user: str,
    collection: str,
) -> NeighbourResult:
    """`found` holds (raw edge, frontier entity it was found from) in store order (out-edges first).

    The first finder of an edge wins. With a query vector and an entity index, edges are
    scored on their relation and far-end label vectors (from `index`) and the best `edge_limit` kept, with a fair
    share per frontier entity; otherwise all edges come back unscored.
    """
    seen: set[RawEdge] = set()
    edges: list[RawEdge] = []
    far: list[str] = []
    via: list[str] = []
    for e, entity in found:
        if e in seen:
            continue
        seen.add(e)
        edges.append(e)
        far.append(e[2] if e[0] == entity else e[0])
        via.append(entity)
    if query_vector is None or index is None:
        return NeighbourResult([edge_triple(e) for e in edges], [None] * len(edges), rows_read)
    vecs = await index.vectors(user, collection, list({e[1] for e in edges} | set(far)))
    scores = edge_scores(query_vector, [(e[1], f) for e, f in zip(edges, far, strict=True)], vecs)
    keep = best(scores, edge_limit or len(edges), via)
    return NeighbourResult([edge_triple(edges[i]) for i in keep], [scores[i] for i in keep], rows_read)
