"""Triples-store processor: the writer of triples. A request alone (the gateway's import) is a whole
load: stored, its entities' and relations' labels embedded with the flow's embeddings service,
recorded. `kgflow load triples` sends a load of many batches as its steps (loader.LoadSteps):
begin, store each batch, embed the labels, finish. A finished load (and a request alone) tells
label caches the collection changed."""

from __future__ import annotations

from processors.base.operations import by_operation
from processors.base.processor import FlowContext, ServiceSpec
from processors.ingest.triples.loader import StoreSteps, run_load
from processors.models.embeddings.client import FlowEmbedder
from processors.services.store_processor import StoreProcessor
from schemas.base import ScopedRequest
from schemas.services import EMBEDDINGS, TRIPLES_STORE, Service
from schemas.triples import BeginLoad, EmbedLabels, FinishLoad, StoreTriples, TriplesStoreResponse


class TriplesStoreProcessor(StoreProcessor):
    """Serves `triples-store` (see the module docstring)."""

    name = TRIPLES_STORE.name

    def services(self) -> list[ServiceSpec]:
        table = {StoreTriples: self.store, BeginLoad: self.begin, EmbedLabels: self.embed, FinishLoad: self.finish}
        return [ServiceSpec(TRIPLES_STORE, by_operation(table))]

    def calls(self) -> list[Service]:
        return [EMBEDDINGS]

    def _steps(self, req: ScopedRequest, flow: FlowContext) -> StoreSteps:
        return StoreSteps(self.stores, FlowEmbedder(flow.client(EMBEDDINGS)), req.tenant.unscoped)

    async def store(self, req: StoreTriples, flow: FlowContext) -> TriplesStoreResponse:
        """A batch of a load: stored. Alone: a whole load, then the change announced."""
        steps = self._steps(req, flow)
        if req.in_load:
            stored, changed = await steps.store(req.triples, req.fresh)
            return TriplesStoreResponse(stored=stored, changed=sorted(changed))
        report = await run_load(steps, req.triples, source="imported triples")
        await self.announce_graph_changed(req.user, req.collection)
        return TriplesStoreResponse(stored=report.triples, embedded=report.embedded)

    async def begin(self, req: BeginLoad, flow: FlowContext) -> TriplesStoreResponse:
        """Check the flow's model against the collection's and mark the collection incomplete."""
        begun = await self._steps(req, flow).begin(req.source)
        return TriplesStoreResponse(fresh=begun.fresh, repairing=begun.repairing)

    async def embed(self, req: EmbedLabels, flow: FlowContext) -> TriplesStoreResponse:
        """Embed the labels that lack a vector (or changed) with the flow's model."""
        return TriplesStoreResponse(embedded=await self._steps(req, flow).embed(req.kind, req.iris, req.labels,
                                                                                 req.keep))  # fmt: skip

    async def finish(self, req: FinishLoad, flow: FlowContext) -> TriplesStoreResponse:
        """Record the load finished (or failed), then announce the change."""
        await self._steps(req, flow).finish(req.stored, req.vectors, req.error)
        await self.announce_graph_changed(req.user, req.collection)
        return TriplesStoreResponse(stored=req.stored, embedded=req.vectors)
