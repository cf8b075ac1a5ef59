"""kgflow's own gateway client: one multiplexed websocket, TrustGraph framing, kgflow models out."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, TypeVar, cast

import aiohttp
from pydantic import BaseModel

from processors.base.client import RemoteError, RequestTimeout
from processors.base.tasks import cancel_and_wait
from processors.gateway import translate as tr
from schemas.base import Response
from schemas.graph_rag import GraphRagRequest, GraphRagResponse
from schemas.services import GRAPH_RAG, Service

R = TypeVar("R", bound=Response)


def socket_url(url: str) -> str:
    """The websocket URL of a gateway base URL (http(s):// or ws(s)://)."""
    base = url.rstrip("/")
    if base.startswith("http://"):
        base = "ws://" + base[len("http://") :]
    elif base.startswith("https://"):
        base = "wss://" + base[len("https://") :]
    elif not base.startswith(("ws://", "wss://")):
        base = "ws://" + base
    return base if base.endswith("/api/v1/socket") else base + "/api/v1/socket"


class GatewayClient:
    """`async with GatewayClient(url, token) as gw: await gw.graph_rag("default", request)`."""

    def __init__(self, url: str, token: str | None = None, timeout_s: float = 120.0) -> None:
        self.url = socket_url(url)
        self.token = token
        self.timeout_s = timeout_s
        self.workspace: str | None = None
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: dict[str, asyncio.Queue[dict[str, Any]]] = {}
        self._ids = itertools.count(1)

    async def __aenter__(self) -> GatewayClient:
        await self.connect()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def connect(self) -> None:
        """Open the socket and authenticate (raises RemoteError on auth-failed)."""
        self._session = aiohttp.ClientSession()
        try:
            self._ws = await self._session.ws_connect(self.url, max_msg_size=64 << 20, heartbeat=30.0)
            await self._ws.send_str(json.dumps({"type": "auth", "token": self.token or ""}))
            reply = json.loads((await self._ws.receive(timeout=30.0)).data)
        except (aiohttp.ClientError, TimeoutError, TypeError, ValueError) as e:
            await self.close()
            raise RuntimeError(f"cannot reach the gateway at {self.url}: {e}") from None
        if reply.get("type") != "auth-ok":
            await self.close()
            raise RemoteError("auth-failed", str(reply.get("error", reply)))
        self.workspace = reply.get("default_workspace") or tr.DEFAULT_WORKSPACE
        self._reader = asyncio.create_task(self._read(), name="gateway-client-reader")

    async def close(self) -> None:
        """Close the socket; pending requests fail."""
        await cancel_and_wait(self._reader)
        self._reader = None
        if self._ws is not None:
            await self._ws.close()
        if self._session is not None:
            await self._session.close()
        self._ws = self._session = None

    async def _read(self) -> None:
        assert self._ws is not None
        try:
            async for msg in self._ws:
                if msg.type != aiohttp.WSMsgType.TEXT:
                    continue
                frame = json.loads(msg.data)
                queue = self._pending.get(str(frame.get("id")))
                if queue is not None:
                    queue.put_nowait(frame)
        finally:
            closed = {"error": {"type": "disconnected", "message": "the gateway closed the socket"}}
            for queue in self._pending.values():
                queue.put_nowait(closed)

    async def stream(
        self, service: str, request: dict[str, Any], flow: str | None = None, workspace: str | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        """Send one request; yield each `response` payload until `complete`. Errors are raised."""
        if self._ws is None:
            raise RuntimeError("not connected")
        rid = f"kg-{next(self._ids)}"
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._pending[rid] = queue
        frame: dict[str, Any] = {"id": rid, "workspace": workspace or self.workspace, "service": service}
        if flow is not None:
            frame["flow"] = flow
        frame["request"] = request
        try:
            await self._ws.send_str(json.dumps(frame))
            deadline = asyncio.get_running_loop().time() + self.timeout_s
            while True:
                remaining = max(deadline - asyncio.get_running_loop().time(), 0.001)
                try:
                    reply = await asyncio.wait_for(queue.get(), remaining)
                except TimeoutError:
                    raise RequestTimeout(f"no answer from the gateway within {self.timeout_s}s") from None
                if reply.get("error"):
                    err = reply["error"]
                    raise RemoteError(str(err.get("type", "error")), str(err.get("message", err)))
                if "response" in reply:
                    yield reply["response"]
                if reply.get("complete"):
                    return
        finally:
            self._pending.pop(rid, None)

    async def request(
        self, service: str, request: dict[str, Any], flow: str | None = None, workspace: str | None = None
    ) -> dict[str, Any]:
        """Send one request and return its last payload."""
        last: dict[str, Any] = {}
        async for payload in self.stream(service, request, flow, workspace):
            last = payload
        return last

    async def graph_rag(self, flow_id: str, req: GraphRagRequest) -> GraphRagResponse:
        """Answer `req` in flow `flow_id` (its `user` is sent as the workspace); the final kgflow response."""
        wire = tr.graph_rag_request_to_wire(req.model_copy(update={"streaming": False}))
        return tr.graph_rag_response_from_wire(await self.request(GRAPH_RAG.name, wire, flow_id, req.user))

    async def call(self, service: Service[BaseModel, R], flow_id: str, req: BaseModel) -> R:
        """A kgflow service through the gateway (its `user` is sent as the workspace): the final
        response, validated as the service's response model."""
        last: R | None = None
        async for res in self.stream_call(service, flow_id, req):
            last = res
        if last is None:
            raise RemoteError("bad-response", f"{service.name} answered nothing")
        return last

    async def stream_call(self, service: Service[BaseModel, R], flow_id: str, req: BaseModel) -> AsyncIterator[R]:
        """Every response of a kgflow service through the gateway (progress, then the answer),
        validated as the service's response model; graph-rag answers once."""
        if service.name == GRAPH_RAG.name:
            yield cast(R, await self.graph_rag(flow_id, cast(GraphRagRequest, req)))  # the service is graph-rag's
            return
        wire = tr.kgflow_request_to_wire(req)
        async for payload in self.stream(service.name, wire, flow_id, getattr(req, "user", None)):
            yield service.response.model_validate(payload)
