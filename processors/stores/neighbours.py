"""What every store does with a frontier's raw edges: dedupe, then (optionally) score and keep
the best. One implementation, so the backends cannot drift apart."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence

from processors.stores.edge_scoring import best, edge_scores
from processors.stores.protocol import NeighbourResult
from schemas.terms import Triple

VectorLookup = Callable[[list[str]], Awaitable[Mapping[str, Sequence[float]]]]


async def rank_neighbours(
    found: Iterable[tuple[Triple, str]],
    rows_read: int,
    query_vector: Sequence[float] | None,
    edge_limit: int | None,
    vectors: VectorLookup | None,
) -> NeighbourResult:
    """`found` holds (edge, frontier entity it was found from) in store order (out-edges first).

    The first finder of an edge wins. With a query vector and a vector lookup, edges are
    scored on their relation and far-end labels and the best `edge_limit` kept, with a fair
    share per frontier entity; otherwise all edges come back unscored.
    """
    seen: set[Triple] = set()
    triples: list[Triple] = []
    far: list[str] = []
    via: list[str] = []
    for t, entity in found:
        if t in seen:
            continue
        seen.add(t)
        triples.append(t)
        far.append(t.o.value if t.s.value == entity else t.s.value)
        via.append(entity)
    if query_vector is None or vectors is None:
        return NeighbourResult(triples, [None] * len(triples), rows_read)
    vecs = await vectors(list({t.p.value for t in triples} | set(far)))
    scores = edge_scores(query_vector, [(t.p.value, f) for t, f in zip(triples, far, strict=True)], vecs)
    keep = best(scores, edge_limit or len(triples), via)
    return NeighbourResult([triples[i] for i in keep], [scores[i] for i in keep], rows_read)
