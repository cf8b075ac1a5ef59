"""Triples processor: serves `triples` reads — patterns, labels, a frontier's ranked neighbours,
adjacency, distances — one store request each (a distance search one per level it reads), scoped
by user/collection and the request's scope. Writes are `triples-store`'s (processors/ingest/triples)."""

from __future__ import annotations

from processors.algorithms.bfs import DistanceSearch, shortest_distances
from processors.algorithms.edges import NeighbourResult, rank_neighbours
from processors.base.operations import by_operation
from processors.base.processor import FlowContext, ServiceSpec
from processors.services.store_processor import StoreProcessor
from processors.stores.protocol import HeldDistances
from schemas.services import TRIPLES
from schemas.triples import (
    AdjacencyQuery,
    DistancesQuery,
    LabelsQuery,
    NeighboursQuery,
    PatternQuery,
    ScoredTriple,
    TriplesResponse,
)


class TriplesProcessor(StoreProcessor):
    """Serves `triples` from the triple store (see the module docstring)."""

    name = TRIPLES.name

    def services(self) -> list[ServiceSpec]:
        table = {PatternQuery: self.pattern, LabelsQuery: self.labels, AdjacencyQuery: self.adjacency,
                 DistancesQuery: self.distances, NeighboursQuery: self.neighbours}  # fmt: skip
        return [ServiceSpec(TRIPLES, by_operation(table))]

    async def pattern(self, req: PatternQuery, flow: FlowContext) -> TriplesResponse:
        """Triples matching the pattern."""
        found = await self.stores.triples.pattern(req.tenant, req.s, req.p, req.o, req.limit)
        return TriplesResponse(triples=[ScoredTriple(s=t.s, p=t.p, o=t.o) for t in found], rows_read=len(found))

    async def labels(self, req: LabelsQuery, flow: FlowContext) -> TriplesResponse:
        """`rdfs:label` of each IRI."""
        labels = await self.stores.triples.labels(req.tenant, req.iris)
        return TriplesResponse(labels=labels, rows_read=len(labels))

    async def adjacency(self, req: AdjacencyQuery, flow: FlowContext) -> TriplesResponse:
        """The (s, o) pairs touching the entities."""
        pairs = await self._adjacent(req, req.entities)
        return TriplesResponse(pairs=pairs, rows_read=len(pairs))

    async def neighbours(self, req: NeighboursQuery, flow: FlowContext) -> TriplesResponse:
        """The frontier's best edges, scored."""
        res = await self._neighbours(req)
        triples = [ScoredTriple(s=t.s, p=t.p, o=t.o, score=sc) for t, sc in zip(res.triples, res.scores, strict=True)]
        return TriplesResponse(triples=triples, rows_read=res.rows_read)

    async def _adjacent(self, req: AdjacencyQuery | DistancesQuery, entities: list[str]) -> list[tuple[str, str]]:
        """One adjacency read; with a scope, relations with a source chunk in it (the document
        store's provenance)."""
        if req.scope is None or req.scope.is_empty:
            return await self.stores.triples.adjacent(req.tenant, entities, req.limit_per_entity)
        found = await self.stores.documents.scoped_neighbours(req.tenant, entities, req.limit_per_entity)
        return [(e[0], e[2]) for e, _ in found]

    async def distances(self, req: DistancesQuery, flow: FlowContext) -> TriplesResponse:
        """The breadth-first search, one adjacency read per level (or the store's own search over
        the graph it holds); hops of the targets reached."""
        store = self.stores.triples
        if isinstance(store, HeldDistances) and (req.scope is None or req.scope.is_empty):
            search = DistanceSearch(req.sources, req.targets, req.max_distance, req.limit_per_entity, req.max_frontier)
            held = await store.distances(req.tenant, search)
            if held is not None:
                return TriplesResponse(hops=held.hops, truncated=held.truncated, levels=held.levels)
        read = 0

        async def level(frontier: list[str]) -> list[tuple[str, str]]:
            nonlocal read
            pairs = await self._adjacent(req, frontier)
            read += len(pairs)
            return pairs

        d = await shortest_distances(level, req.sources, req.targets, req.max_distance, req.max_frontier)
        wanted = {e for group in req.targets for e in group}
        hops = {e: n for e, n in d.hops.items() if e in wanted}
        return TriplesResponse(hops=hops, truncated=d.truncated, levels=d.levels, rows_read=read)

    async def _neighbours(self, req: NeighboursQuery) -> NeighbourResult:
        """The frontier's edges; with a scope, only relations with a source chunk in it (from the
        document store's provenance), ranked as every store ranks."""
        if req.scope is None or req.scope.is_empty:
            return await self.stores.triples.neighbours(req)
        found = await self.stores.documents.scoped_neighbours(req.tenant, req.entities, req.limit_per_entity)
        out = [(e, via) for e, via in found if req.direction in ("both", "out" if e[0] == via else "in")]
        return await rank_neighbours(out, len(found), req, self.stores.entities)
