"""Triples-store processor: the writer of triples. A batch is stored, its entities' and relations'
labels embedded with the flow's embeddings service (see loader.py), and label caches are told the
collection changed."""

from __future__ import annotations

from processors.base.processor import FlowContext, ServiceSpec, StoreProcessor
from processors.ingest.triples.loader import load_triples
from processors.models.embeddings.client import FlowEmbedder
from schemas.services import EMBEDDINGS, TRIPLES_STORE, Service
from schemas.triples import StoreTriples, TriplesResponse


class TriplesStoreProcessor(StoreProcessor):
    """Serves `triples-store` (see the module docstring)."""

    name = TRIPLES_STORE.name

    def services(self) -> list[ServiceSpec]:
        return [ServiceSpec(TRIPLES_STORE, self.write)]

    def calls(self) -> list[Service]:
        return [EMBEDDINGS]

    async def write(self, req: StoreTriples, flow: FlowContext) -> TriplesResponse:
        """Store, embed labels with the flow's embeddings service, then announce the change."""
        report = await load_triples(self.stores, FlowEmbedder(flow.client(EMBEDDINGS)), req.user, req.collection,
                                    req.triples, source="imported triples")  # fmt: skip
        await self.announce_graph_changed(req.user, req.collection)
        return TriplesResponse(stored=report.triples)
