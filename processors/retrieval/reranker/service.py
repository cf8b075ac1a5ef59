"""reranker processor: binds a long-lived Reranker per flow to the bus."""

from __future__ import annotations

from processors.base.metrics import record_cost
from processors.base.processor import FlowContext
from processors.base.settings import flow_params
from processors.retrieval.bus_sources import BusSources
from processors.retrieval.reranker.rerank import Reranker, RerankerSettings
from processors.retrieval.reranker.sources import RerankSources
from processors.retrieval.service import RetrievalProcessor
from schemas.reranker import RerankRequest, RerankResponse
from schemas.services import RERANKER


class RerankerProcessor(RetrievalProcessor[Reranker, RerankRequest]):
    """Serves `reranker`."""

    name = RERANKER.name
    service, sources = RERANKER, RerankSources

    def build(self, flow: FlowContext[Reranker]) -> Reranker:
        settings = flow_params(RerankerSettings, flow.parameters)
        return Reranker(BusSources(flow, settings.stage_timeout_s), settings)

    async def query(self, req: RerankRequest, flow: FlowContext[Reranker]) -> RerankResponse:
        """Reorder the request's results."""
        res = await flow.state.run(req)
        if res.stats:
            record_cost(self.name, res.stats)
        return res
