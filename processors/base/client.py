"""Request/response over the bus: correlation ids, timeouts, streaming."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator
from typing import Generic, TypeVar

from pydantic import BaseModel

from processors.accounting.usage import StoreUsage, current
from processors.base.bus import Bus, Consumer, Producer
from processors.base.tasks import cancel_and_close
from schemas.base import Response
from schemas.services import Service
from schemas.topics import topic

ResT = TypeVar("ResT", bound=Response)
R = TypeVar("R", bound=Response)
log = logging.getLogger(__name__)

# Message properties: the client's deadline for the first response (epoch seconds) and how long
# it then waits for each next one (a processor does not start, and abandons, work nobody waits
# for), and each response frame's number within its request (a client drops frames it has
# already seen when a redelivered request is served again), when the client sent it (a
# redelivered request is told apart from a new one asked later: a delete in between wins), and
# the store usage a response frame reports (`requests,round_trips` since the request's previous
# frame; see processors.accounting.usage): a client adds it to the counter of the request it is serving.
DEADLINE = "deadline"
SENT = "sent"
IDLE = "idle"
SEQ = "seq"
STORE = "store"


class RequestTimeout(RuntimeError):
    """No (complete) response arrived within the timeout."""


class RemoteError(RuntimeError):
    """The service answered with an error response."""

    def __init__(self, type_: str, message: str) -> None:
        super().__init__(f"{type_}: {message}")
        self.type = type_
        self.message = message


class RequestResponseClient(Generic[ResT]):
    """Sends requests to a service topic and matches responses by the `id` property.

    Every client reads the whole response topic (a non-durable reader) and keeps only
    the responses to its own requests, so several clients can share one topic. A stream
    abandoned before its last response (the caller was cancelled, timed out or stopped
    reading) is cancelled at the service too: its `id` goes to the service's cancel topic.
    """

    def __init__(
        self,
        bus: Bus,
        request_topic: str,
        response_topic: str,
        response_model: type[ResT],
        timeout_s: float,
        cancel_topic: str | None = None,
    ) -> None:
        self._bus = bus
        self._request_topic = request_topic
        self._response_topic = response_topic
        self._cancel_topic = cancel_topic
        self._cancel_producer: Producer | None = None
        self._cancels: set[asyncio.Task[None]] = set()
        self._model = response_model
        self.timeout_s = timeout_s
        self._pending: dict[str, asyncio.Queue[tuple[int, ResT, StoreUsage | None]]] = {}
        self._producer: Producer | None = None
        self._reader: Consumer | None = None
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    @staticmethod
    def for_service(
        bus: Bus, service: Service[BaseModel, R], flow_id: str, timeout_s: float
    ) -> RequestResponseClient[R]:
        """A client of `service` in flow `flow_id`: its responses are typed as the service's."""
        return RequestResponseClient(
            bus,
            topic(service.name, flow_id),
            topic(service.name, flow_id, "response"),
            service.response,
            timeout_s,
            topic(service.name, flow_id, "cancel"),
        )

    async def start(self) -> None:
        """Open the producer and the response reader (idempotent)."""
        async with self._lock:
            if self._task is not None:
                return
            self._reader = await self._bus.reader(self._response_topic)
            self._producer = await self._bus.producer(self._request_topic)
            self._task = asyncio.create_task(self._dispatch(), name=f"responses:{self._response_topic}")

    async def stop(self) -> None:
        """Stop reading responses; pending requests fail with a timeout."""
        if self._cancels:
            await asyncio.wait(set(self._cancels), timeout=5.0)
        await cancel_and_close(self._task, self._reader)
        self._task = None

    async def _dispatch(self) -> None:
        assert self._reader is not None
        while True:
            msg = await self._reader.receive()
            queue = self._pending.get(msg.properties.get("id", ""))
            if queue is None:
                continue
            try:
                seq = int(msg.properties.get(SEQ, "-1"))
            except ValueError:
                seq = -1
            store = StoreUsage.from_property(msg.properties[STORE]) if STORE in msg.properties else None
            try:
                queue.put_nowait((seq, self._model.model_validate_json(msg.data), store))
            except Exception as e:  # a response we cannot parse is still an answer
                err = self._model.model_validate({"error": {"type": "bad-response", "message": str(e)}})
                queue.put_nowait((seq, err, store))

    async def stream(self, request: BaseModel, timeout_s: float | None = None) -> AsyncIterator[ResT]:
        """Send `request`; yield each response until `end_of_stream`. Errors are raised.

        The timeout is the longest wait for the next response (a streaming service that reports
        progress stays alive); leaving early cancels the request at the service."""
        await self.start()
        assert self._producer is not None
        rid = str(uuid.uuid4())
        queue: asyncio.Queue[tuple[int, ResT, StoreUsage | None]] = asyncio.Queue()
        usage = current()  # the counter of the request this call serves, if any
        self._pending[rid] = queue
        wait = timeout_s or self.timeout_s
        expected = 0  # the next frame number; lower ones are repeats of a redelivered request, but its last
        finished = False
        try:
            now = time.time()
            props = {"id": rid, DEADLINE: f"{now + wait:.3f}", IDLE: f"{wait:.3f}", SENT: f"{now:.3f}"}
            await self._producer.send(request.model_dump_json(by_alias=False).encode(), props)
            while True:
                try:
                    seq, res, store = await asyncio.wait_for(queue.get(), wait)
                except TimeoutError:
                    raise RequestTimeout(f"no response from {self._request_topic} within {wait}s") from None
                if usage is not None and store is not None:
                    usage.add(store)  # a repeat's too: a redelivered request asked the stores again
                if 0 <= seq < expected and not res.end_of_stream:
                    continue  # a repeat (the last frame is sent once: an attempt that had less to say ends sooner)
                expected = max(expected, seq + 1)
                finished = res.end_of_stream
                if res.error is not None:
                    raise RemoteError(res.error.type, res.error.message)
                yield res
                if res.end_of_stream:
                    return
        finally:
            self._pending.pop(rid, None)
            if not finished:
                self._cancel(rid)

    def _cancel(self, rid: str) -> None:
        """Tell the service to stop working on `rid` (in the background: the caller may be
        being cancelled itself)."""
        if self._cancel_topic is None:
            return
        task = asyncio.get_running_loop().create_task(self._send_cancel(rid))
        self._cancels.add(task)
        task.add_done_callback(self._cancels.discard)

    async def _send_cancel(self, rid: str) -> None:
        assert self._cancel_topic is not None
        try:
            if self._cancel_producer is None:
                self._cancel_producer = await self._bus.producer(self._cancel_topic)
            await self._cancel_producer.send(b"{}", {"id": rid})
        except Exception:  # best effort: the service finishes the request unobserved
            log.warning("could not send a cancellation", extra={"topic": self._cancel_topic}, exc_info=True)

    async def request(self, request: BaseModel, timeout_s: float | None = None) -> ResT:
        """Send `request` and return its (last) response."""
        last: ResT | None = None
        async for res in self.stream(request, timeout_s):
            last = res
        assert last is not None
        return last
