"""lazy-rag processor: binds a long-lived LazyRag per flow to the bus."""

from __future__ import annotations

from processors.base.metrics import record_cost
from processors.base.processor import FlowContext
from processors.base.settings import flow_params
from processors.models.text_completion.tokens import FlowTokenCounter
from processors.retrieval.bus_sources import BusSources, collecting_notices
from processors.retrieval.lazy_rag.rag import LazyRag
from processors.retrieval.lazy_rag.retrieve import LazyRagSettings
from processors.retrieval.lazy_rag.sources import LazySources
from processors.retrieval.service import RetrievalProcessor
from schemas import services as sv
from schemas.lazy_rag import MAX_TIMEOUT_S, LazyRagRequest, LazyRagResponse


class LazyRagProcessor(RetrievalProcessor[LazyRag, LazyRagRequest]):
    """Serves `lazy-rag`."""

    name = sv.LAZY_RAG.name
    service, sources = sv.LAZY_RAG, LazySources

    def build(self, flow: FlowContext[LazyRag]) -> LazyRag:
        settings = flow_params(LazyRagSettings, flow.parameters)
        count = FlowTokenCounter(flow.parameters)
        # The summary call may take what is left of the request's own timeout (which bounds it).
        return LazyRag(BusSources(flow, settings.stage_timeout_s, MAX_TIMEOUT_S), settings, count)

    async def query(self, req: LazyRagRequest, flow: FlowContext[LazyRag]) -> LazyRagResponse:
        """Retrieve and (unless `expand` or no model) summarise."""
        with collecting_notices() as notices:  # an unknown or incomplete collection, as graph-rag says
            res = await flow.state.run(req)
        res.warnings = [*notices, *res.warnings]
        if res.stats:
            record_cost(self.name, res.stats)
        return res
