"""kg-query processor: binds a long-lived KgQuery per flow to the bus."""

from __future__ import annotations

from processors.base.processor import FlowContext, FlowProcessor, ServiceSpec
from processors.base.settings import flow_params
from processors.models.text_completion.tokens import FlowTokenCounter
from processors.retrieval.bus_sources import BusSources, calls_of, collecting_notices
from processors.retrieval.kg_query.query import KgQuery, KgQuerySettings
from processors.retrieval.kg_query.sources import KgSources
from schemas import services as sv
from schemas.kg_query import KgQueryRequest, KgQueryResponse
from schemas.services import AnyService


class KgQueryProcessor(FlowProcessor):
    """Serves `kg-query`."""

    name = sv.KG_QUERY.name

    def services(self) -> list[ServiceSpec]:
        return [ServiceSpec(sv.KG_QUERY, self.query)]

    def calls(self) -> list[AnyService]:
        return calls_of(BusSources, KgSources)

    async def on_flow_start(self, flow: FlowContext[KgQuery]) -> None:
        settings = flow_params(KgQuerySettings, flow.parameters)
        flow.state = KgQuery(BusSources(flow, settings.stage_timeout_s), settings, FlowTokenCounter(flow.parameters))

    async def query(self, req: KgQueryRequest, flow: FlowContext[KgQuery]) -> KgQueryResponse:
        """Build the context by mode, answer from it."""
        with collecting_notices() as notices:  # an unknown or incomplete collection, as graph-rag says
            res = await flow.state.run(req)
        res.warnings = [*notices, *res.warnings]
        return res
