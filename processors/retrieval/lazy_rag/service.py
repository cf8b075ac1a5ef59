"""lazy-rag processor: binds a long-lived LazyRag per flow to the bus."""

from __future__ import annotations

from processors.base.metrics import record_stages
from processors.base.processor import FlowContext, FlowProcessor, ServiceSpec
from processors.base.settings import flow_params
from processors.models.text_completion.tokens import FlowTokenCounter
from processors.retrieval.bus_sources import BusSources
from processors.retrieval.lazy_rag.rag import LazyRag
from processors.retrieval.lazy_rag.retrieve import LazyRagSettings
from schemas.lazy_rag import MAX_TIMEOUT_S, LazyRagRequest, LazyRagResponse
from schemas.services import (
    COMMUNITIES,
    DOCUMENTS,
    EMBEDDINGS,
    EXTRACTOR,
    GRAPH_EMBEDDINGS,
    LABEL_RESOLVER,
    LAZY_RAG,
    RERANKER,
    TEXT_COMPLETION,
    Service,
)


class LazyRagProcessor(FlowProcessor):
    """Serves `lazy-rag`."""

    name = LAZY_RAG.name

    def services(self) -> list[ServiceSpec]:
        return [ServiceSpec(LAZY_RAG, self.query)]

    def calls(self) -> list[Service]:
        return [
            EMBEDDINGS,
            DOCUMENTS,
            GRAPH_EMBEDDINGS,
            LABEL_RESOLVER,
            COMMUNITIES,
            EXTRACTOR,
            TEXT_COMPLETION,
            RERANKER,
        ]

    async def on_flow_start(self, flow: FlowContext) -> None:
        settings = flow_params(LazyRagSettings, flow.parameters)
        count = FlowTokenCounter(flow.parameters)
        # The summary call may take what is left of the request's own timeout (which bounds it).
        flow.state = LazyRag(BusSources(flow, settings.stage_timeout_s, MAX_TIMEOUT_S), settings, count)

    async def query(self, req: LazyRagRequest, flow: FlowContext) -> LazyRagResponse:
        """Retrieve and (unless `expand` or no model) summarise."""
        res = await flow.state.run(req)
        if res.stats:
            record_stages(self.name, res.stats.stage_ms, res.stats.store_round_trips)
        return res
