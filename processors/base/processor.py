"""FlowProcessor: a processor declares the services it serves and the services it
calls; the framework subscribes to the right topics for every flow it belongs to."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, TypeAdapter, ValidationError

from processors.base.bus import Bus, BusMessage, Consumer, Producer
from processors.base.client import RequestResponseClient
from processors.base.config_client import ConfigWatcher
from processors.base.errors import ServiceError
from processors.base.metrics import LATENCY, REQUESTS
from processors.base.settings import RuntimeSettings, StoreSettings
from processors.base.tasks import cancel_and_wait
from schemas.base import Error, Response
from schemas.flows import Blueprint, ConfigState, Flow
from schemas.services import Service
from schemas.topics import topic

log = logging.getLogger(__name__)

Handler = Callable[[Any, "FlowContext"], Awaitable[Response] | AsyncIterator[Response]]


@dataclass(frozen=True)
class ServiceSpec:
    """A service this processor serves (its entry in `schemas.services`) and the handler."""

    service: Service
    handler: Handler


class Host(Protocol):
    """What processors are built from: the bus, the process settings and (lazily) the stores."""

    bus: Bus
    runtime: RuntimeSettings
    store_settings: StoreSettings

    @property
    def stores(self) -> Any:
        """The process's stores (`processors.stores.factory.Stores`), opened on first use."""
        ...


@dataclass
class FlowContext:
    """What a handler sees of its flow: id, merged parameters, clients, per-flow state."""

    id: str
    parameters: dict[str, Any]
    clients: dict[str, RequestResponseClient[Any]] = field(default_factory=dict)
    state: Any = None

    def client(self, service: Service) -> RequestResponseClient[Any]:
        """The client of a service this processor declared it calls."""
        return self.clients[service.name]


@dataclass
class _RunningFlow:
    ctx: FlowContext
    consumers: list[Consumer]
    tasks: list[asyncio.Task[None]]


class FlowProcessor:
    """Base of every flow processor. Subclasses set `name`, `services()` and `calls()`."""

    name: str = "processor"

    def __init__(self, bus: Bus, runtime: RuntimeSettings | None = None) -> None:
        self.bus = bus
        self.runtime = runtime or RuntimeSettings()
        self._slots = asyncio.Semaphore(self.runtime.concurrency)
        self._flows: dict[str, _RunningFlow] = {}
        self._inflight: set[asyncio.Task[None]] = set()
        self._running: dict[tuple[str, str, str], asyncio.Task[None]] = {}  # (service, flow, id) -> its task
        self._cancelled: set[tuple[str, str, str]] = set()  # requests their client cancelled
        self._producers: dict[str, Producer] = {}
        self._watcher: ConfigWatcher | None = None

    @classmethod
    def create(cls, host: Host) -> FlowProcessor:
        """Build the processor from the running system (processors that need stores override this)."""
        return cls(host.bus, host.runtime)

    # --- what subclasses declare -------------------------------------------------
    def services(self) -> list[ServiceSpec]:
        """Services this processor serves."""
        return []

    def calls(self) -> list[Service]:
        """Services this processor calls."""
        return []

    async def on_flow_start(self, flow: FlowContext) -> None:
        """Build per-flow state (kept for the flow's life, never per request)."""

    async def on_flow_stop(self, flow: FlowContext) -> None:
        """Release per-flow state."""

    # --- lifecycle ---------------------------------------------------------------
    async def start(self) -> None:
        """Follow the config: serve every flow whose blueprint names this processor."""
        self._watcher = ConfigWatcher(self.bus, self.apply_config)
        await self._watcher.start()

    async def stop(self) -> None:
        """Stop serving all flows, waiting for in-flight requests."""
        if self._watcher:
            await self._watcher.stop()
        for flow_id in list(self._flows):
            await self.stop_flow(flow_id)

    @property
    def flow_ids(self) -> list[str]:
        """Flows being served."""
        return sorted(self._flows)

    async def apply_config(self, state: ConfigState) -> None:
        """Start flows that now include this processor; stop those that no longer do."""
        wanted: dict[str, tuple[Flow, Blueprint]] = {}
        for flow in state.flows.values():
            bp = state.blueprints.get(flow.blueprint)
            if bp is not None and self.name in bp.processors:
                wanted[flow.id] = (flow, bp)
        for flow_id in list(self._flows):
            if flow_id not in wanted:
                await self.stop_flow(flow_id)
        for flow_id, (flow, bp) in wanted.items():
            if flow_id not in self._flows:
                await self.start_flow(flow_id, flow.processor_parameters(bp, self.name))

    async def start_flow(self, flow_id: str, parameters: dict[str, Any]) -> FlowContext:
        """Serve `flow_id` now (also used directly by tests and the embedded runner)."""
        ctx = FlowContext(id=flow_id, parameters=parameters)
        for service in self.calls():
            client = RequestResponseClient.for_service(self.bus, service, flow_id, self.runtime.request_timeout_s)
            await client.start()
            ctx.clients[service.name] = client
        await self.on_flow_start(ctx)
        consumers, tasks = [], []
        for spec in self.services():
            name = spec.service.name
            cons = await self.bus.consumer(
                topic(name, flow_id),
                name,
                max_redeliveries=self.runtime.max_redeliveries,
                prefetch=self.runtime.concurrency,
            )
            consumers.append(cons)
            tasks.append(asyncio.create_task(self._serve(cons, spec, ctx), name=f"{name}:{flow_id}"))
            cancels = await self.bus.reader(topic(name, flow_id, "cancel"))
            consumers.append(cancels)
            tasks.append(asyncio.create_task(self._watch_cancels(cancels, name, flow_id), name=f"cancel:{name}"))
        self._flows[flow_id] = _RunningFlow(ctx, consumers, tasks)
        log.info("flow started", extra={"processor": self.name, "flow": flow_id})
        return ctx

    async def stop_flow(self, flow_id: str) -> None:
        """Stop consuming `flow_id`'s topics and release its state."""
        running = self._flows.pop(flow_id, None)
        if running is None:
            return
        for task in running.tasks:
            await cancel_and_wait(task)
        for cons in running.consumers:
            await cons.close()
        for client in running.ctx.clients.values():
            await client.stop()
        await self.on_flow_stop(running.ctx)
        log.info("flow stopped", extra={"processor": self.name, "flow": flow_id})

    # --- serving -----------------------------------------------------------------
    async def _serve(self, consumer: Consumer, spec: ServiceSpec, ctx: FlowContext) -> None:
        while True:
            msg = await consumer.receive()
            await self._slots.acquire()
            task = asyncio.create_task(self._handle(msg, consumer, spec, ctx))
            self._inflight.add(task)
            key = (spec.service.name, ctx.id, msg.properties.get("id", ""))
            self._running[key] = task
            task.add_done_callback(lambda t, k=key: self._done(t, k))  # type: ignore[misc]

    def _done(self, task: asyncio.Task[None], key: tuple[str, str, str]) -> None:
        self._inflight.discard(task)
        if self._running.get(key) is task:
            del self._running[key]
        self._cancelled.discard(key)
        self._slots.release()

    async def _watch_cancels(self, reader: Consumer, service: str, flow_id: str) -> None:
        """Cancel the requests whose client went away (their ids arrive on the cancel topic)."""
        while True:
            msg = await reader.receive()
            key = (service, flow_id, msg.properties.get("id", ""))
            task = self._running.get(key)
            if task is not None and not task.done():
                self._cancelled.add(key)
                task.cancel()

    async def _respond(self, spec: ServiceSpec, ctx: FlowContext, rid: str, res: Response) -> None:
        name = topic(spec.service.name, ctx.id, "response")
        prod = self._producers.get(name)
        if prod is None:
            prod = self._producers[name] = await self.bus.producer(name)
        await prod.send(res.model_dump_json().encode(), {"id": rid})

    async def _handle(self, msg: BusMessage, consumer: Consumer, spec: ServiceSpec, ctx: FlowContext) -> None:
        rid = msg.properties.get("id")
        service = spec.service
        started = time.perf_counter()
        outcome = "ok"
        sent = 0
        try:
            if not rid:
                log.warning("request without id dropped", extra={"service": service.name})
                outcome = "no-id"
                await consumer.ack(msg)
                return
            try:
                req = parse_request(service.request, msg.data)
                result = spec.handler(req, ctx)
                if inspect.isasyncgen(result):
                    async with contextlib.aclosing(result):
                        async for res in result:
                            await self._respond(spec, ctx, rid, res)
                            sent += 1
                else:
                    await self._respond(spec, ctx, rid, await result)  # type: ignore[misc]
                    sent += 1
            except (ServiceError, ValidationError, ValueError) as e:
                outcome = "error"
                await self._respond(spec, ctx, rid, error_response(service.response, e))
            await consumer.ack(msg)
        except asyncio.CancelledError:
            if (service.name, ctx.id, rid) not in self._cancelled:
                raise  # the flow or the process is stopping: the request goes back to the subscription
            outcome = "cancelled"  # its client went away: nobody wants the answer, done with it
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
            await consumer.ack(msg)
        except Exception as e:
            outcome = "failed"
            log.exception("request failed", extra={"service": service.name, "flow": ctx.id})
            if sent == 0 and msg.redelivery_count < self.runtime.max_redeliveries:
                await consumer.nack(msg)  # another instance may succeed
                return
            with contextlib.suppress(Exception):
                await self._respond(spec, ctx, rid or "", error_response(service.response, e))
            await (consumer.nack(msg) if sent == 0 else consumer.ack(msg))
        finally:
            REQUESTS.labels(self.name, ctx.id, service.name, outcome).inc()
            LATENCY.labels(self.name, service.name).observe(time.perf_counter() - started)


def parse_request(model: Any, data: bytes) -> Any:
    """Validate raw JSON against a request model (RootModel unions are unwrapped)."""
    if isinstance(model, type) and issubclass(model, BaseModel):
        obj = model.model_validate_json(data)
        return getattr(obj, "root", obj)
    return TypeAdapter(model).validate_json(data)


def error_response(response: type[Response], exc: Exception) -> Response:
    """A response of type `response` carrying `exc` as a typed error."""
    if isinstance(exc, ServiceError):
        err = Error(type=exc.type, message=exc.message)
    elif isinstance(exc, ValidationError):
        fields = "; ".join(f"{'.'.join(map(str, e['loc'])) or '<root>'}: {e['msg']}" for e in exc.errors()[:5])
        err = Error(type="bad-request", message=f"invalid request: {fields}")
    elif isinstance(exc, ValueError):
        err = Error(type="bad-request", message=str(exc))
    else:
        err = Error(type="internal-error", message=f"{type(exc).__name__}: {exc}")
    return response(error=err, end_of_stream=True)
