"""Triples into a remote `kgflow up` through its gateway's import route
(`GET /api/v1/flow/{flow}/import/triples`, TrustGraph's bulk import): frames sent as the file is
read, each acknowledged once the flow has stored it and embedded its labels (the gateway writes a
batch at a time through the flow's triples-store service)."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import quote

import aiohttp

from processors.gateway import translate as tr
from processors.gateway.client import socket_url
from schemas.terms import Triple

FRAME = 1000  # triples per frame
IN_FLIGHT = 10  # frames sent and not yet acknowledged (the gateway writes up to 5,000 triples at once)


def import_url(url: str, flow: str, user: str) -> str:
    """The import route of a gateway base URL."""
    base = socket_url(url).removesuffix("/api/v1/socket")
    return f"{base}/api/v1/flow/{quote(flow, safe='')}/import/triples?workspace={quote(user, safe='')}"


async def import_over_gateway(
    url: str,
    token: str | None,
    flow: str,
    user: str,
    collection: str,
    triples: Iterable[Triple],
    progress: Callable[[str, int, int | None], None],
) -> int:
    """Send `triples` in frames (at most IN_FLIGHT unacknowledged) and wait until every frame is
    acknowledged; a refusal is raised (RuntimeError with the gateway's reason). Returns how many
    triples were acknowledged."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(import_url(url, flow, user), headers=headers, max_msg_size=64 << 20, heartbeat=30.0) as ws,
    ):
        acks = _Acks(ws, progress)
        replies = asyncio.create_task(acks.read())
        try:
            sent, it = 0, iter(triples)
            while batch := list(itertools.islice(it, FRAME)):
                await acks.wait_for(sent - IN_FLIGHT + 1, replies)
                frame = {"metadata": {"id": sent, "collection": collection},
                         "triples": [tr.triple_to_wire(t) for t in batch]}  # fmt: skip
                await ws.send_str(json.dumps(frame))
                sent += 1
            await acks.wait_for(sent, replies)
        finally:
            replies.cancel()
    return acks.triples


class _Acks:
    """The gateway's replies: frames and triples acknowledged so far; a refusal ends the import."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, progress: Callable[[str, int, int | None], None]) -> None:
        self.ws, self.progress = ws, progress
        self.frames = self.triples = 0
        self.changed = asyncio.Event()

    async def read(self) -> None:
        """Count acknowledgements until the socket closes; raise on a refusal."""
        while True:
            msg = await self.ws.receive()
            if msg.type != aiohttp.WSMsgType.TEXT:
                raise RuntimeError(f"the gateway closed the import ({msg.type.name}) after {self.triples} triples")
            reply: dict[str, Any] = json.loads(msg.data)
            if "error" in reply:
                err = reply["error"]
                raise RuntimeError(f"the gateway refused triples: {err.get('type')}: {err.get('message')}")
            ack = reply.get("ack") or {}
            self.frames += int(ack.get("frames", 0))
            self.triples += int(ack.get("triples", 0))
            self.progress("store", int(ack.get("triples", 0)), None)
            self.changed.set()

    async def wait_for(self, frames: int, replies: asyncio.Task[None]) -> None:
        """Wait until `frames` frames are acknowledged (raising what ended the replies first)."""
        while self.frames < frames:
            self.changed.clear()
            waiting = asyncio.ensure_future(self.changed.wait())
            done, _ = await asyncio.wait({waiting, replies}, return_when=asyncio.FIRST_COMPLETED)
            if replies in done:
                waiting.cancel()
                replies.result()
                raise RuntimeError("the gateway stopped acknowledging the import")
