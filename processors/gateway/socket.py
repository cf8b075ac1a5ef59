"""The multiplexed websocket `GET /api/v1/socket` (TrustGraph framing).

1. First frame `{"type": "auth", "token"}` -> `{"type": "auth-ok", "default_workspace"}` or
   `{"type": "auth-failed", "error"}` (then the socket closes).
2. Requests `{"id", "workspace"?, "service", "flow"?, "request"}`; every reply frame echoes `id`:
   `{"id", "response", "complete"}`, errors `{"id", "error": {"type", "message"}, "complete": true}`.
At most `max_inflight` requests run per socket: while that many are open the gateway stops
reading frames (TCP back-pressure), it never queues without bound. When the socket closes, its
requests are cancelled, and so is the work the services do for them (see RequestResponseClient).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import WSMsgType, web

from processors.gateway import metrics
from processors.gateway import translate as tr
from processors.gateway.auth import Authenticator, AuthError, Principal
from processors.gateway.dispatch import Dispatcher
from processors.gateway.errors import GatewayError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SocketLimits:
    """Per-socket limits (from GatewaySettings and RuntimeSettings)."""

    max_frame_bytes: int
    max_inflight: int
    request_timeout_s: float
    auth_timeout_s: float = 30.0


class SocketSession:
    """One client websocket: authenticates, then runs requests concurrently with bounded in-flight."""

    def __init__(self, dispatcher: Dispatcher, auth: Authenticator, limits: SocketLimits) -> None:
        self.dispatcher = dispatcher
        self.auth = auth
        self.limits = limits
        self.ws = web.WebSocketResponse(max_msg_size=limits.max_frame_bytes * 4, heartbeat=30.0)
        self._send_lock = asyncio.Lock()
        self._slots = asyncio.Semaphore(limits.max_inflight)
        self._tasks: set[asyncio.Task[None]] = set()

    async def send(self, obj: dict[str, Any]) -> None:
        """Send one JSON frame (frames of concurrent requests never interleave)."""
        if self.ws.closed:
            return
        async with self._send_lock:
            with contextlib.suppress(ConnectionError, RuntimeError):
                await self.ws.send_str(json.dumps(obj, ensure_ascii=False))

    async def error(self, rid: str | int | None, type_: str, message: str) -> None:
        """An error frame for request `rid` (None when the frame had no readable id)."""
        await self.send({"id": rid, "error": {"type": type_, "message": message}, "complete": True})

    async def run(self, request: web.Request) -> web.WebSocketResponse:
        """Serve the socket until the client closes it."""
        await self.ws.prepare(request)
        metrics.SOCKETS.inc()
        try:
            principal = await self._authenticate(request)
            if principal is not None:
                await self._serve(principal)
        finally:
            metrics.SOCKETS.dec()
            for task in list(self._tasks):
                task.cancel()
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
            await self.ws.close()
        return self.ws

    async def _authenticate(self, request: web.Request) -> Principal | None:
        header = request.headers.get("Authorization")
        try:
            msg = await self.ws.receive(timeout=self.limits.auth_timeout_s)
        except TimeoutError:
            await self.send({"type": "auth-failed", "error": "no auth frame received"})
            return None
        if msg.type != WSMsgType.TEXT:
            return None
        try:
            frame = tr.loads(msg.data)
        except tr.BadRequest:
            frame = None
        if isinstance(frame, dict) and frame.get("type") == "auth":
            try:
                principal = self.auth.check(frame.get("token") or None)
            except AuthError as e:
                await self.send({"type": "auth-failed", "error": e.message})
                return None
            await self.send({"type": "auth-ok", "default_workspace": principal.default_workspace})
            return principal
        # No auth frame: acceptable only on an open gateway or with a valid bearer header.
        try:
            principal = self.auth.check_header(header)
        except AuthError as e:
            await self.send({"type": "auth-failed", "error": f"first frame must be an auth frame ({e.message})"})
            return None
        await self._accept(msg.data, principal)
        return principal

    async def _serve(self, principal: Principal) -> None:
        while not self.ws.closed:
            await self._slots.acquire()  # full: stop reading, the client's sends back up
            msg = await self.ws.receive()
            if msg.type == WSMsgType.TEXT:
                await self._accept(msg.data, principal, slot_held=True)
            elif msg.type == WSMsgType.BINARY:
                self._slots.release()
                await self.error(None, "bad-request", "binary frames are not supported; send JSON text")
            else:  # CLOSE, CLOSING, CLOSED, ERROR (e.g. a frame above the hard size limit)
                self._slots.release()
                break

    async def _accept(self, text: str, principal: Principal, slot_held: bool = False) -> None:
        """Validate a request frame and start it (releases the slot if it does not start). Whatever
        the frame holds, the answer is an error frame for it: the socket and its other requests go on."""
        if not slot_held:
            await self._slots.acquire()
        started = False
        try:
            started = await self._start(text, principal)
        except Exception as e:  # a bug must cost this frame only, never the socket
            log.exception("gateway frame failed")
            await self.error(tr.frame_id(text), "internal-error", f"{type(e).__name__}: {e}")
        finally:
            if not started:
                self._slots.release()

    async def _start(self, text: str, principal: Principal) -> bool:
        """Start the request of one frame; False (after an error frame) when it does not start."""
        if len(text) > self.limits.max_frame_bytes:
            await self.error(
                tr.frame_id(text), "frame-too-large", f"frame of {len(text)} bytes > {self.limits.max_frame_bytes}"
            )
            return False
        try:
            frame = tr.loads(text)
        except tr.BadRequest as e:
            await self.error(tr.frame_id(text), "bad-request", str(e))
            return False
        return await self._start_frame(frame, principal)

    async def _start_frame(self, frame: object, principal: Principal) -> bool:
        """Check a parsed frame's envelope and run its request as a task."""
        if not isinstance(frame, dict):
            await self.error(None, "bad-request", "a frame must be a JSON object")
            return False
        rid = frame.get("id")
        if not isinstance(rid, str | int) or isinstance(rid, bool) or rid == "":
            await self.error(None, "bad-request", "id: every request needs an `id` (string)")
            return False
        service, flow = frame.get("service"), frame.get("flow")
        if not isinstance(service, str) or not service:
            await self.error(rid, "bad-request", "service: Field required")
            return False
        if flow is not None and (not isinstance(flow, str) or not flow):
            await self.error(rid, "bad-request", "flow: expected a flow id")
            return False
        if "request" not in frame:
            await self.error(rid, "bad-request", "request: Field required")
            return False
        task = asyncio.create_task(self._run(principal, rid, frame, service, flow))
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return True

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._slots.release()

    async def _run(
        self, principal: Principal, rid: str | int, frame: dict[str, Any], service: str, flow: str | None
    ) -> None:
        began = time.perf_counter()
        outcome = "ok"
        metrics.INFLIGHT.inc()
        try:
            idle = self.limits.request_timeout_s + 10  # the longest wait for the next frame
            async with asyncio.timeout(idle) as deadline:
                frames = self.dispatcher.handle(principal, frame.get("workspace"), service, flow, frame["request"])
                async for payload, complete in frames:
                    await self.send({"id": rid, "response": payload, "complete": complete})
                    deadline.reschedule(asyncio.get_running_loop().time() + idle)
        except GatewayError as e:
            outcome = e.type
            await self.error(rid, e.type, e.message)
        except TimeoutError:
            outcome = "timeout"
            await self.error(rid, "timeout", f"no answer for {self.limits.request_timeout_s}s")
        finally:
            metrics.INFLIGHT.dec()
            metrics.REQUESTS.labels("socket", metrics.service_label(service), outcome).inc()
            metrics.LATENCY.labels(metrics.service_label(service)).observe(time.perf_counter() - began)
