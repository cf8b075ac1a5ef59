"""kg-query processor: binds a long-lived KgQuery per flow to the bus."""

from __future__ import annotations

from processors.base.processor import FlowContext
from processors.base.settings import flow_params
from processors.models.text_completion.tokens import FlowTokenCounter
from processors.retrieval.bus_sources import BusSources, collecting_notices
from processors.retrieval.kg_query.query import KgQuery, KgQuerySettings
from processors.retrieval.kg_query.sources import KgSources
from processors.retrieval.service import RetrievalProcessor
from schemas import services as sv
from schemas.kg_query import KgQueryRequest, KgQueryResponse


class KgQueryProcessor(RetrievalProcessor[KgQuery, KgQueryRequest]):
    """Serves `kg-query`."""

    name = sv.KG_QUERY.name
    service, sources = sv.KG_QUERY, KgSources

    def build(self, flow: FlowContext[KgQuery]) -> KgQuery:
        settings = flow_params(KgQuerySettings, flow.parameters)
        return KgQuery(BusSources(flow, settings.stage_timeout_s), settings, FlowTokenCounter(flow.parameters))

    async def query(self, req: KgQueryRequest, flow: FlowContext[KgQuery]) -> KgQueryResponse:
        """Build the context by mode, answer from it."""
        with collecting_notices() as notices:  # an unknown or incomplete collection, as graph-rag says
            res = await flow.state.run(req)
        res.warnings = [*notices, *res.warnings]
        return res
