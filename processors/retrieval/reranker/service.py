"""reranker processor: binds a long-lived Reranker per flow to the bus."""

from __future__ import annotations

from processors.base.metrics import record_cost
from processors.base.processor import FlowContext, FlowProcessor, ServiceSpec
from processors.base.settings import flow_params
from processors.retrieval.bus_sources import BusSources, calls_of
from processors.retrieval.reranker.rerank import Reranker, RerankerSettings
from processors.retrieval.reranker.sources import RerankSources
from schemas.reranker import RerankRequest, RerankResponse
from schemas.services import RERANKER, AnyService


class RerankerProcessor(FlowProcessor):
    """Serves `reranker`."""

    name = RERANKER.name

    def services(self) -> list[ServiceSpec]:
        return [ServiceSpec(RERANKER, self.rerank)]

    def calls(self) -> list[AnyService]:
        return calls_of(BusSources, RerankSources)

    async def on_flow_start(self, flow: FlowContext[Reranker]) -> None:
        settings = flow_params(RerankerSettings, flow.parameters)
        flow.state = Reranker(BusSources(flow, settings.stage_timeout_s), settings)

    async def rerank(self, req: RerankRequest, flow: FlowContext[Reranker]) -> RerankResponse:
        """Reorder the request's results."""
        res = await flow.state.run(req)
        if res.stats:
            record_cost(self.name, res.stats)
        return res
