"""Per-socket back-pressure: at most `max_inflight` requests run; the rest wait unread (pure socket logic,
with a stand-in dispatcher whose requests finish only when the test lets them)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from aiohttp import web
from gw_support import served, wait_for

from processors.gateway.auth import Authenticator
from processors.gateway.socket import SocketLimits, SocketSession


class GatedDispatcher:
    """Each request waits for one `release()`; records how many ran at once."""

    def __init__(self) -> None:
        self.running = 0
        self.started = 0
        self.max_seen = 0
        self._gate = asyncio.Semaphore(0)

    def release(self, n: int = 1) -> None:
        for _ in range(n):
            self._gate.release()

    async def handle(
        self, principal: Any, workspace: Any, service: str, flow: Any, request: Any, streaming_allowed: bool = True
    ) -> AsyncIterator[tuple[dict[str, Any], bool]]:
        self.running += 1
        self.started += 1
        self.max_seen = max(self.max_seen, self.running)
        try:
            await self._gate.acquire()
            yield {"n": request["n"]}, True
        finally:
            self.running -= 1


async def test_socket_stops_reading_while_full() -> None:
    stub = GatedDispatcher()
    limits = SocketLimits(max_frame_bytes=1 << 20, max_inflight=3, request_timeout_s=60)

    async def handler(request: web.Request) -> web.WebSocketResponse:
        return await SocketSession(stub, Authenticator({}), limits).run(request)  # type: ignore[arg-type]

    app = web.Application()
    app.router.add_get("/api/v1/socket", handler)
    async with served(app) as port:
        async with aiohttp.ClientSession() as s:
            ws = await s.ws_connect(f"ws://127.0.0.1:{port}/api/v1/socket")
            await ws.send_json({"type": "auth", "token": ""})
            assert (await ws.receive_json(timeout=10))["type"] == "auth-ok"
            for n in range(10):
                await ws.send_json({"id": f"r{n}", "service": "x", "flow": "f", "request": {"n": n}})

            async def three_running() -> bool:
                return stub.running == 3

            await wait_for(three_running)
            await asyncio.sleep(0.3)  # give the gateway every chance to read more frames
            assert stub.started == 3, "frames were read although the socket was full"
            got: dict[str, int] = {}
            for _ in range(10):
                stub.release()
                frame = await ws.receive_json(timeout=10)
                assert frame["complete"] is True
                got[frame["id"]] = frame["response"]["n"]
            assert got == {f"r{n}": n for n in range(10)}
            assert stub.max_seen == 3
