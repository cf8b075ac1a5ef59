"""lazy-rag processor: binds a long-lived LazyRag per flow to the bus."""

from __future__ import annotations

from processors.base.metrics import record_cost
from processors.base.processor import FlowContext, FlowProcessor, ServiceSpec
from processors.base.settings import flow_params
from processors.models.text_completion.tokens import FlowTokenCounter
from processors.retrieval.bus_sources import BusSources, calls_of, collecting_notices
from processors.retrieval.lazy_rag.rag import LazyRag
from processors.retrieval.lazy_rag.retrieve import LazyRagSettings
from processors.retrieval.lazy_rag.sources import LazySources
from schemas import services as sv
from schemas.lazy_rag import MAX_TIMEOUT_S, LazyRagRequest, LazyRagResponse
from schemas.services import AnyService


class LazyRagProcessor(FlowProcessor):
    """Serves `lazy-rag`."""

    name = sv.LAZY_RAG.name

    def services(self) -> list[ServiceSpec]:
        return [ServiceSpec(sv.LAZY_RAG, self.query)]

    def calls(self) -> list[AnyService]:
        return calls_of(BusSources, LazySources)

    async def on_flow_start(self, flow: FlowContext[LazyRag]) -> None:
        settings = flow_params(LazyRagSettings, flow.parameters)
        count = FlowTokenCounter(flow.parameters)
        # The summary call may take what is left of the request's own timeout (which bounds it).
        flow.state = LazyRag(BusSources(flow, settings.stage_timeout_s, MAX_TIMEOUT_S), settings, count)

    async def query(self, req: LazyRagRequest, flow: FlowContext[LazyRag]) -> LazyRagResponse:
        """Retrieve and (unless `expand` or no model) summarise."""
        with collecting_notices() as notices:  # an unknown or incomplete collection, as graph-rag says
            res = await flow.state.run(req)
        res.warnings = [*notices, *res.warnings]
        if res.stats:
            record_cost(self.name, res.stats)
        return res
