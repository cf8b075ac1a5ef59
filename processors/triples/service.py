"""Triples processor: every request is one store round trip, scoped by user/collection."""

from __future__ import annotations

from typing import Any

from processors.base.bus import Bus
from processors.base.processor import FlowContext, FlowProcessor, ServiceSpec
from processors.stores.protocol import TripleStore
from schemas.triples import (
    LabelsQuery,
    NeighboursQuery,
    PatternQuery,
    ScoredTriple,
    TriplesRequest,
    TriplesResponse,
)


class TriplesProcessor(FlowProcessor):
    """Serves `triples` from a triple store."""

    name = "triples"

    def __init__(self, bus: Bus, store: TripleStore, **kw: Any) -> None:
        super().__init__(bus, **kw)
        self.store = store

    def services(self) -> list[ServiceSpec]:
        return [ServiceSpec("triples", TriplesRequest, TriplesResponse, self.query)]

    async def query(self, req: PatternQuery | NeighboursQuery | LabelsQuery, flow: FlowContext) -> TriplesResponse:
        """Dispatch on the request's operation."""
        if isinstance(req, LabelsQuery):
            labels = await self.store.labels(req.user, req.collection, req.iris)
            return TriplesResponse(labels=labels, rows_read=len(labels))
        if isinstance(req, NeighboursQuery):
            res = await self.store.neighbours(
                req.user,
                req.collection,
                req.entities,
                req.limit_per_entity,
                req.direction,
                req.query_vector,
                req.edge_limit,
            )
            triples = [
                ScoredTriple(s=t.s, p=t.p, o=t.o, score=sc) for t, sc in zip(res.triples, res.scores, strict=True)
            ]
            return TriplesResponse(triples=triples, rows_read=res.rows_read)
        found = await self.store.pattern(req.user, req.collection, req.s, req.p, req.o, req.limit)
        return TriplesResponse(triples=[ScoredTriple(s=t.s, p=t.p, o=t.o) for t in found], rows_read=len(found))
