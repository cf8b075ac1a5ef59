"""What every retrieval processor is: one service, answered from a long-lived per-flow state that
its subclass builds from the flow's parameters, calling just the services its sources use."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from typing import ClassVar, Generic, TypeVar

from pydantic import BaseModel

from processors.base.processor import FlowContext, FlowProcessor, ServiceSpec
from processors.retrieval.bus_sources import BusSources, calls_of
from schemas.base import Response
from schemas.services import AnyService

S = TypeVar("S")  # the per-flow state (GraphRag, LazyRag, ...)
Q = TypeVar("Q", bound=BaseModel)  # the service's request


class RetrievalProcessor(FlowProcessor, Generic[S, Q]):
    """Serves `service` with `query`, from the state `build` makes when a flow starts. Its calls are
    those of `sources` (the protocol the state reads through) as `bus_sources` serves them."""

    service: ClassVar[AnyService]
    sources: ClassVar[type]
    bus_sources: ClassVar[type] = BusSources

    def services(self) -> list[ServiceSpec]:
        return [ServiceSpec(self.service, self.query)]

    def calls(self) -> list[AnyService]:
        return calls_of(self.bus_sources, self.sources)

    async def on_flow_start(self, flow: FlowContext[S]) -> None:
        flow.state = self.build(flow)

    def build(self, flow: FlowContext[S]) -> S:
        """The flow's state (kept for the flow's life)."""
        raise NotImplementedError

    def query(self, req: Q, flow: FlowContext[S]) -> Awaitable[Response] | AsyncIterator[Response]:
        """Answer one request (a coroutine: one response; an async iterator: a stream)."""
        raise NotImplementedError
