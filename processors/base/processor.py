"""FlowProcessor: a processor declares the services it serves and the services it
calls; the framework subscribes to the right topics for every flow it belongs to."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

from pydantic import BaseModel

from processors.accounting.refusal import StoreRefusal
from processors.accounting.usage import Reporting, begin
from processors.base.bus import Bus, BusMessage, Consumer, Producer
from processors.base.client import DEADLINE, IDLE, SEQ, STORE, RemoteError, RequestResponseClient
from processors.base.config_client import ConfigWatcher
from processors.base.errors import QueryTimeout, ServiceError
from processors.base.metrics import CONSUMER_STATE, INTERNAL_ERRORS, LATENCY, REQUESTS
from processors.base.registry import Host
from processors.base.settings import RuntimeSettings
from processors.base.tasks import cancel_and_wait
from processors.base.wire import error_response, parse_request
from schemas.base import Response
from schemas.flows import Blueprint, ConfigState, Flow
from schemas.services import Service
from schemas.topics import topic

log = logging.getLogger(__name__)
S = TypeVar("S")  # a flow's state
R = TypeVar("R", bound=Response)

Handler = Callable[[Any, "FlowContext"], Awaitable[Response] | AsyncIterator[Response]]


@dataclass(frozen=True)
class ServiceSpec:
    """A service this processor serves (its entry in `schemas.services`) and the handler.

    With `bulk_bytes`, a request bigger than that is bulk work: it waits for one of the
    `bulk_concurrency` bulk places instead of taking one of the processor's `concurrency` places,
    so small requests (questions) never queue behind bulk work.
    """

    service: Service
    handler: Handler
    bulk_bytes: int | None = None


@dataclass
class FlowContext(Generic[S]):
    """What a handler sees of its flow: id, merged parameters, clients, and the per-flow state `S`
    its processor builds in `on_flow_start` (`FlowContext[GraphRag]`: the checker knows its type)."""

    id: str
    parameters: dict[str, Any]
    clients: dict[str, RequestResponseClient[Response]] = field(default_factory=dict)
    _state: S | None = None

    @property
    def state(self) -> S:
        """The flow's state (set by the processor's `on_flow_start`)."""
        if self._state is None:
            raise RuntimeError(f"flow {self.id!r} has no state: its processor's on_flow_start sets it")
        return self._state

    @state.setter
    def state(self, value: S) -> None:
        self._state = value

    def client(self, service: Service[BaseModel, R]) -> RequestResponseClient[R]:
        """The client of a service this processor declared it calls (typed by the service)."""
        return cast(RequestResponseClient[R], self.clients[service.name])


@dataclass
class _RunningFlow:
    ctx: FlowContext
    consumers: list[Consumer]
    tasks: list[asyncio.Task[None]]  # the serving loops (one per service)
    inflight: set[asyncio.Task[None]] = field(default_factory=set)  # handlers running now


class FlowProcessor:
    """Base of every flow processor. Subclasses set `name`, `services()` and `calls()`."""

    name: str = "processor"

    def __init__(self, bus: Bus, runtime: RuntimeSettings | None = None) -> None:
        self.bus = bus
        self.runtime = runtime or RuntimeSettings()
        self._slots = asyncio.Semaphore(self.runtime.concurrency)
        self._bulk_waiting = asyncio.Semaphore(self.runtime.concurrency)  # bulk requests received, not done
        self._bulk_slots = asyncio.Semaphore(self.runtime.bulk_concurrency)  # bulk requests running
        self._flows: dict[str, _RunningFlow] = {}
        self._inflight: set[asyncio.Task[None]] = set()
        self._running: dict[tuple[str, str, str], asyncio.Task[None]] = {}  # (service, flow, id) -> its task
        self._cancelled: set[tuple[str, str, str]] = set()  # requests their client cancelled
        self._producers: dict[str, Producer] = {}
        self._opening = asyncio.Lock()  # one producer per topic, however many requests answer at once
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
        """Start flows that now include this processor; stop those that no longer do. A flow this
        processor cannot start is logged (one line naming it) and skipped: the others are served."""
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
                try:
                    await self.start_flow(flow_id, flow.processor_parameters(bp, self.name))
                except Exception as e:  # one bad flow must not stop the others
                    log.error("%s cannot serve flow %r: %s", self.name, flow_id, e)

    async def start_flow(self, flow_id: str, parameters: dict[str, Any]) -> FlowContext:
        """Serve `flow_id` now (also used directly by tests and the embedded runner)."""
        ctx = FlowContext(id=flow_id, parameters=parameters)
        running = _RunningFlow(ctx, [], [])
        try:
            for service in self.calls():
                client = RequestResponseClient.for_service(self.bus, service, flow_id, self.runtime.request_timeout_s)
                ctx.clients[service.name] = client
                await client.start()
            await self.on_flow_start(ctx)
            for spec in self.services():
                name = spec.service.name
                cons = await self.bus.consumer(
                    topic(name, flow_id),
                    name,
                    max_redeliveries=self.runtime.max_redeliveries,
                    prefetch=self.runtime.concurrency,
                )
                running.consumers.append(cons)
                running.tasks.append(asyncio.create_task(self._serve(cons, spec, running), name=f"{name}:{flow_id}"))
                cancels = await self.bus.reader(topic(name, flow_id, "cancel"))
                running.consumers.append(cancels)
                running.tasks.append(
                    asyncio.create_task(self._watch_cancels(cancels, name, flow_id), name=f"cancel:{name}:{flow_id}")
                )
        except BaseException:
            await self._release(running)
            raise
        self._flows[flow_id] = running
        for spec in self.services():
            CONSUMER_STATE.labels(self.name, flow_id, spec.service.name).set(1)
        log.info("flow started", extra={"processor": self.name, "flow": flow_id})
        return ctx

    async def stop_flow(self, flow_id: str) -> None:
        """Stop receiving `flow_id`'s requests, let in-flight handlers finish (at most
        `drain_timeout_s`; those still running are cancelled and their requests go back to the
        subscription), then release the flow's state."""
        running = self._flows.pop(flow_id, None)
        if running is None:
            return
        for spec in self.services():
            with contextlib.suppress(KeyError):
                CONSUMER_STATE.remove(self.name, flow_id, spec.service.name)
        for task in running.tasks:
            await cancel_and_wait(task)
        running.tasks.clear()
        if running.inflight:
            _, late = await asyncio.wait(set(running.inflight), timeout=self.runtime.drain_timeout_s)
            if late:
                log.warning("%s: %d requests of flow %r still running after %ss were cancelled",
                            self.name, len(late), flow_id, self.runtime.drain_timeout_s)  # fmt: skip
                for task in late:
                    await cancel_and_wait(task)
        await self._release(running)
        await self.on_flow_stop(running.ctx)
        log.info("flow stopped", extra={"processor": self.name, "flow": flow_id})

    async def _release(self, running: _RunningFlow) -> None:
        """Stop a flow's serving loops, consumers and clients."""
        for task in running.tasks:
            await cancel_and_wait(task)
        for cons in running.consumers:
            await cons.close()
        for client in running.ctx.clients.values():
            await client.stop()

    # --- serving -----------------------------------------------------------------
    async def _serve(self, consumer: Consumer, spec: ServiceSpec, running: _RunningFlow) -> None:
        while True:
            msg = await consumer.receive()
            bulk = spec.bulk_bytes is not None and len(msg.data) > spec.bulk_bytes
            if bulk and self._bulk_waiting.locked():  # refused, never queued behind: questions go on
                task = asyncio.create_task(self._refuse(msg, consumer, spec, running.ctx))
                running.inflight.add(task)
                task.add_done_callback(running.inflight.discard)
                continue
            places = self._bulk_waiting if bulk else self._slots
            await places.acquire()
            task = asyncio.create_task(self._handle(msg, consumer, spec, running.ctx, bulk))
            self._inflight.add(task)
            running.inflight.add(task)
            task.add_done_callback(self._inflight.discard)
            task.add_done_callback(running.inflight.discard)
            task.add_done_callback(lambda _t, p=places: p.release())
            key = (spec.service.name, running.ctx.id, msg.properties.get("id", ""))
            self._running[key] = task
            task.add_done_callback(lambda t, k=key: self._forget(t, k))  # type: ignore[misc]

    def _forget(self, task: asyncio.Task[None], key: tuple[str, str, str]) -> None:
        if self._running.get(key) is task:
            del self._running[key]
        self._cancelled.discard(key)

    async def _watch_cancels(self, reader: Consumer, service: str, flow_id: str) -> None:
        """Cancel the requests whose client went away (their ids arrive on the cancel topic)."""
        while True:
            msg = await reader.receive()
            key = (service, flow_id, msg.properties.get("id", ""))
            task = self._running.get(key)
            if task is not None and not task.done():
                self._cancelled.add(key)
                task.cancel()

    async def _respond(
        self, spec: ServiceSpec, ctx: FlowContext, rid: str, res: Response, seq: int = 0, store: Reporting | None = None
    ) -> None:
        """Send one response frame, numbered (`seq`) so a client drops the repeats of a redelivery,
        with the store usage of the request since its previous frame (`STORE`)."""
        prod = await self._producer(topic(spec.service.name, ctx.id, "response"))
        props = {"id": rid, SEQ: str(seq)}
        if store is not None and (news := store.news()) is not None:
            props[STORE] = news.to_property()
        await prod.send(res.model_dump_json().encode(), props)

    async def _producer(self, name: str) -> Producer:
        """This processor's producer on topic `name`, opened on first use."""
        prod = self._producers.get(name)
        if prod is None:
            async with self._opening:  # a burst of first answers would each open one otherwise
                prod = self._producers.get(name)
                if prod is None:
                    prod = self._producers[name] = await self.bus.producer(name)
        return prod

    async def _refuse(self, msg: BusMessage, consumer: Consumer, spec: ServiceSpec, ctx: FlowContext) -> None:
        """Answer a bulk request that found every bulk place taken (`busy`), and drop it."""
        err = ServiceError("busy", f"{spec.service.name}: too many bulk requests in flight; retry later")
        with contextlib.suppress(Exception):
            await self._respond(spec, ctx, msg.properties.get("id", ""), error_response(spec.service.response, err))
        await consumer.ack(msg)
        REQUESTS.labels(self.name, ctx.id, spec.service.name, "busy").inc()

    def _budget(self, msg: BusMessage) -> tuple[float, float | None]:
        """Seconds this request may run before its first frame (the handler timeout, or less when
        the client's deadline is nearer), and how long its client waits for each next frame."""
        budget, idle = self.runtime.handler_timeout_s, None
        with contextlib.suppress(KeyError, ValueError):
            budget = min(budget, float(msg.properties[DEADLINE]) - time.time())
        with contextlib.suppress(KeyError, ValueError):
            idle = float(msg.properties[IDLE]) or None
        return budget, idle

    async def _handle(
        self, msg: BusMessage, consumer: Consumer, spec: ServiceSpec, ctx: FlowContext, bulk: bool = False
    ) -> None:
        store = Reporting(begin())  # this task's store requests (and those of the services it calls)
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
            budget, idle = self._budget(msg)
            loop = asyncio.get_running_loop()
            hard = loop.time() + self.runtime.handler_timeout_s  # no request runs longer, frames or not
            limit: asyncio.Timeout | None = None
            try:
                if budget <= 0:
                    raise QueryTimeout(f"{service.name}: the client stopped waiting before the request was served")
                async with asyncio.timeout(budget) as limit, self._bulk_slots if bulk else contextlib.nullcontext():
                    req = parse_request(service.request, msg.data)
                    result = spec.handler(req, ctx)
                    if isinstance(result, Awaitable):  # a coroutine: one response
                        await self._respond(spec, ctx, rid, await result, 0, store)
                        sent += 1
                    else:
                        async with contextlib.aclosing(_generator(result)) as frames:
                            async for res in frames:
                                await self._respond(spec, ctx, rid, res, sent, store)
                                sent += 1
                                if idle:  # the client waits `idle` more seconds for the next frame
                                    limit.reschedule(min(hard, loop.time() + idle))
            except TimeoutError:
                if limit is None or not limit.expired():
                    raise
                outcome = "timeout"
                took = time.perf_counter() - started
                log.warning("%s: request abandoned after %.1fs", service.name, took, extra={"flow": ctx.id})
                err = QueryTimeout(f"{service.name} did not finish within {took:.1f}s; request abandoned")
                await self._respond(spec, ctx, rid, error_response(service.response, err), sent, store)
            except (ServiceError, RemoteError, StoreRefusal) as e:  # the client's error, or a called service's:
                outcome = "error"  # retrying here would only ask it again (a dead model twice)
                await self._respond(spec, ctx, rid, error_response(service.response, e), sent, store)
            await consumer.ack(msg)
        except asyncio.CancelledError:
            if (service.name, ctx.id, rid) not in self._cancelled:
                raise  # the flow or the process is stopping: the request goes back to the subscription
            outcome = "cancelled"  # its client went away: nobody wants the answer, done with it
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
            await consumer.ack(msg)
        except Exception as e:  # a fault of ours, whatever its type: logged, retried, then internal-error
            outcome = "failed"
            INTERNAL_ERRORS.labels(self.name, service.name).inc()
            log.exception("request failed", extra={"service": service.name, "flow": ctx.id})
            if sent == 0 and msg.redelivery_count < self.runtime.max_redeliveries:
                await consumer.nack(msg)  # another instance may succeed
                return
            with contextlib.suppress(Exception):
                await self._respond(spec, ctx, rid or "", error_response(service.response, e), sent, store)
            await (consumer.nack(msg) if sent == 0 else consumer.ack(msg))
        finally:
            REQUESTS.labels(self.name, ctx.id, service.name, outcome).inc()
            LATENCY.labels(self.name, service.name).observe(time.perf_counter() - started)


def _generator(frames: AsyncIterator[Response]) -> AsyncGenerator[Response, None]:
    """`frames` as an async generator (closable however the handler wrote its stream)."""
    if isinstance(frames, AsyncGenerator):
        return frames
    return (f async for f in frames)
