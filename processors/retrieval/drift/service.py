"""drift processor: binds a long-lived Drift per flow to the bus; streams progress, then answers."""

from __future__ import annotations

from collections.abc import AsyncIterator

from processors.base.metrics import record_cost
from processors.base.processor import FlowContext, FlowProcessor, ServiceSpec
from processors.base.settings import flow_params
from processors.retrieval.bus_sources import BusSources, calls_of
from processors.retrieval.drift.drift import Drift
from processors.retrieval.drift.settings import MAX_TIMEOUT_S, DriftSettings
from processors.retrieval.drift.sources import DriftSources
from schemas import services as sv
from schemas.drift import DriftRequest, DriftResponse
from schemas.services import AnyService


class DriftProcessor(FlowProcessor):
    """Serves `drift`."""

    name = sv.DRIFT.name

    def services(self) -> list[ServiceSpec]:
        return [ServiceSpec(sv.DRIFT, self.query)]

    def calls(self) -> list[AnyService]:
        return calls_of(BusSources, DriftSources)

    async def on_flow_start(self, flow: FlowContext[Drift]) -> None:
        settings = flow_params(DriftSettings, flow.parameters)
        # A model call is bounded by text-completion's own `llm-timeout` and by the request's
        # `timeout-s` (the search runs within it), not by a second limit here.
        flow.state = Drift(BusSources(flow, settings.stage_timeout_s, MAX_TIMEOUT_S), settings)

    async def query(self, req: DriftRequest, flow: FlowContext[Drift]) -> AsyncIterator[DriftResponse]:
        """Progress responses (unless `streaming` is off), then the answer."""
        async for res in flow.state.stream(req):
            if res.stats:
                record_cost(self.name, res.stats)
            yield res
