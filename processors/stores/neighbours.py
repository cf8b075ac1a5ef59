"""What every store does with a frontier's raw edges: dedupe, then (optionally) score and keep
the best. One implementation, so the backends cannot drift apart."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from processors.stores.edge_scoring import best, combine, path_cosines
from processors.stores.protocol import EntityIndex, NeighbourResult
from schemas.terms import Term, Triple

# An edge as a store row: (s, p, o, o is a literal (truthy), o datatype or "", o language or "").
RawEdge = tuple[str, str, str, int | bool, str, str]


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
    paths: Mapping[str, Sequence[str]] | None = None,
) -> NeighbourResult:
    """`found` holds (raw edge, frontier entity it was found from) in store order (out-edges first).

    The first finder of an edge wins. With a query vector and an entity index, edges are
    scored on the question's similarity to their relation and far-end labels (from `index`)
    and the best `edge_limit` kept, with a fair share per frontier entity; otherwise all
    edges come back unscored. An entity with a path in `paths` (the relations that led to it)
    has its edges' relations scored as that path's continuation (see `path_cosines`).
    """
    first: dict[RawEdge, str] = {}
    for e, entity in found:
        first.setdefault(e, entity)
    edges = list(first)
    if query_vector is None or index is None:
        return NeighbourResult([edge_triple(e) for e in edges], [None] * len(edges), rows_read)
    via = list(first.values())
    # the far end of an edge is the end that is not the frontier entity (None: a literal)
    pairs = [(e[1], e[2] if not e[3] else None) if e[0] == v else (e[1], e[0]) for e, v in zip(edges, via, strict=True)]
    keys = {p for p, _ in pairs} | {f for _, f in pairs if f is not None}
    sims = await index.similarities(user, collection, query_vector, list(keys))
    scores = combine(pairs, sims, await _path_sims(pairs, via, paths, query_vector, index, user, collection))
    keep = best(scores, edge_limit or len(edges), via)
    return NeighbourResult([edge_triple(edges[i]) for i in keep], [scores[i] for i in keep], rows_read)


async def _path_sims(
    pairs: Sequence[tuple[str, str | None]],
    via: Sequence[str],
    paths: Mapping[str, Sequence[str]] | None,
    query_vector: Sequence[float],
    index: EntityIndex,
    user: str,
    collection: str,
) -> list[float] | None:
    """Per edge, the question's cosine to its relation continuing the path to its frontier
    entity (None when no frontier entity has a path: the relation is scored alone)."""
    heads = {v: tuple(paths.get(v, ())) for v in dict.fromkeys(via)} if paths else {}
    distinct = sorted({h for h in heads.values() if h})
    if not distinct:
        return None
    preds = sorted({p for p, _ in pairs})
    vectors = await index.vectors(user, collection, sorted({x for h in distinct for x in h} | set(preds)))
    table = path_cosines(query_vector, [(), *distinct], preds, vectors)  # () for entities without a path
    return [table[heads[v], p] for (p, _), v in zip(pairs, via, strict=True)]
