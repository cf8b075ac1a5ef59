"""drift processor: binds a long-lived Drift per flow to the bus; streams progress, then answers."""

from __future__ import annotations

from collections.abc import AsyncIterator

from processors.base.metrics import record_cost
from processors.base.processor import FlowContext
from processors.base.settings import flow_params
from processors.retrieval.bus_sources import BusSources
from processors.retrieval.drift.drift import Drift
from processors.retrieval.drift.settings import MAX_TIMEOUT_S, DriftSettings
from processors.retrieval.drift.sources import DriftSources
from processors.retrieval.service import RetrievalProcessor
from schemas import services as sv
from schemas.drift import DriftRequest, DriftResponse


class DriftProcessor(RetrievalProcessor[Drift, DriftRequest]):
    """Serves `drift`."""

    name = sv.DRIFT.name
    service, sources = sv.DRIFT, DriftSources

    def build(self, flow: FlowContext[Drift]) -> Drift:
        settings = flow_params(DriftSettings, flow.parameters)
        # A model call is bounded by text-completion's own `llm-timeout` and by the request's
        # `timeout-s` (the search runs within it), not by a second limit here.
        return Drift(BusSources(flow, settings.stage_timeout_s, MAX_TIMEOUT_S), settings)

    async def query(self, req: DriftRequest, flow: FlowContext[Drift]) -> AsyncIterator[DriftResponse]:
        """Progress responses (unless `streaming` is off), then the answer."""
        async for res in flow.state.stream(req):
            if res.stats:
                record_cost(self.name, res.stats)
            yield res
