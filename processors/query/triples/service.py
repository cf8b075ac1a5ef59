"""Triples processor: queries are one store round trip each (a distance query one per level it
searches), scoped by user/collection; writes store the triples, embed new labels and tell label
caches the collection changed."""

from __future__ import annotations

from processors.base.processor import FlowContext, ServiceSpec, StoreProcessor
from processors.ingest.triples_loader import load_triples
from processors.models.embeddings.client import FlowEmbedder
from processors.retrieval.relevance.distances import DistanceSearch, shortest_distances
from processors.retrieval.relevance.ranking import NeighbourResult, rank_neighbours
from processors.stores.protocol import HeldDistances
from schemas.services import EMBEDDINGS, TRIPLES, Service
from schemas.triples import (
    AdjacencyQuery,
    DistancesQuery,
    LabelsQuery,
    NeighboursQuery,
    PatternQuery,
    ScoredTriple,
    StoreTriples,
    TriplesResponse,
)


class TriplesProcessor(StoreProcessor):
    """Serves `triples` from the triple store (and the entity index, for writes)."""

    name = TRIPLES.name

    def services(self) -> list[ServiceSpec]:
        return [ServiceSpec(TRIPLES, self.query)]

    def calls(self) -> list[Service]:
        return [EMBEDDINGS]

    async def query(
        self,
        req: PatternQuery | NeighboursQuery | AdjacencyQuery | DistancesQuery | LabelsQuery | StoreTriples,
        flow: FlowContext,
    ) -> TriplesResponse:
        """Dispatch on the request's operation."""
        store = self.stores.triples
        if isinstance(req, StoreTriples):
            return await self.write(req, flow)
        if isinstance(req, LabelsQuery):
            labels = await store.labels(req.user, req.collection, req.iris)
            return TriplesResponse(labels=labels, rows_read=len(labels))
        if isinstance(req, AdjacencyQuery):
            pairs = await self._adjacent(req, req.entities)
            return TriplesResponse(pairs=pairs, rows_read=len(pairs))
        if isinstance(req, DistancesQuery):
            return await self._distances(req)
        if isinstance(req, NeighboursQuery):
            res = await self._neighbours(req)
            triples = [
                ScoredTriple(s=t.s, p=t.p, o=t.o, score=sc) for t, sc in zip(res.triples, res.scores, strict=True)
            ]
            return TriplesResponse(triples=triples, rows_read=res.rows_read)
        found = await store.pattern(req.user, req.collection, req.s, req.p, req.o, req.limit)
        return TriplesResponse(triples=[ScoredTriple(s=t.s, p=t.p, o=t.o) for t in found], rows_read=len(found))

    async def _adjacent(self, req: AdjacencyQuery | DistancesQuery, entities: list[str]) -> list[tuple[str, str]]:
        """One adjacency read; with a scope, relations with a source chunk in it (the document
        store's provenance)."""
        if req.scope is None or req.scope.is_empty:
            return await self.stores.triples.adjacent(req.user, req.collection, entities, req.limit_per_entity)
        found = await self.stores.documents.scoped_neighbours(
            req.user, req.collection, entities, req.limit_per_entity, req.scope
        )
        return [(e[0], e[2]) for e, _ in found]

    async def _distances(self, req: DistancesQuery) -> TriplesResponse:
        """The breadth-first search, one adjacency read per level (or the store's own search over
        the graph it holds); hops of the targets reached."""
        store = self.stores.triples
        if isinstance(store, HeldDistances) and (req.scope is None or req.scope.is_empty):
            search = DistanceSearch(req.sources, req.targets, req.max_distance, req.limit_per_entity, req.max_frontier)
            held = await store.distances(req.user, req.collection, search)
            if held is not None:
                return TriplesResponse(hops=held.hops, truncated=held.truncated, store_round_trips=1)
        read = 0

        async def level(frontier: list[str]) -> list[tuple[str, str]]:
            nonlocal read
            pairs = await self._adjacent(req, frontier)
            read += len(pairs)
            return pairs

        d = await shortest_distances(level, req.sources, req.targets, req.max_distance, req.max_frontier)
        wanted = {e for group in req.targets for e in group}
        hops = {e: n for e, n in d.hops.items() if e in wanted}
        return TriplesResponse(hops=hops, truncated=d.truncated, store_round_trips=d.round_trips, rows_read=read)

    async def _neighbours(self, req: NeighboursQuery) -> NeighbourResult:
        """The frontier's edges; with a scope, only relations with a source chunk in it (from the
        document store's provenance), ranked as every store ranks."""
        if req.scope is None or req.scope.is_empty:
            return await self.stores.triples.neighbours(req)
        found = await self.stores.documents.scoped_neighbours(
            req.user, req.collection, req.entities, req.limit_per_entity, req.scope
        )
        out = [(e, via) for e, via in found if req.direction in ("both", "out" if e[0] == via else "in")]
        return await rank_neighbours(out, len(found), req, self.stores.entities)

    async def write(self, req: StoreTriples, flow: FlowContext) -> TriplesResponse:
        """Store, embed labels with the flow's embeddings service, then announce the change."""
        report = await load_triples(self.stores, FlowEmbedder(flow.client(EMBEDDINGS)), req.user, req.collection,
                                    req.triples, source="imported triples")  # fmt: skip
        await self.announce_graph_changed(req.user, req.collection)
        return TriplesResponse(stored=report.triples)
