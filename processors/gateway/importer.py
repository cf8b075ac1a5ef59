"""The bulk triples-import websocket `GET /api/v1/flow/{flow}/import/triples`.

Frames `{"metadata": {"id", "collection", ...}, "triples": [...]}` are buffered per collection and
written in batches (at most IMPORT_BATCH triples, or whatever arrived when the client pauses for
IDLE_FLUSH_S). After each write the gateway acknowledges what is durably stored:
`{"ack": {"ids": [frame ids], "frames": n, "triples": n}}`; a frame it cannot store is refused, never
dropped: `{"error": {"type", "message"}, "refused": {"ids", "frames", "triples"}}`. While a batch is
being written the gateway reads no further frames (TCP back-pressure), so nothing queues without
bound. Clients that never read replies (trustgraph-cli) are unaffected.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from processors.gateway import metrics
from processors.gateway import translate as tr
from processors.gateway.auth import Principal
from processors.gateway.dispatch import Dispatcher
from processors.gateway.errors import GatewayError
from schemas.terms import Triple
from schemas.triples import MAX_BATCH

log = logging.getLogger(__name__)
IMPORT_BATCH = MAX_BATCH  # triples buffered per import socket before they are written
IDLE_FLUSH_S = 0.5  # a client that pauses this long gets what it sent written and acknowledged


@dataclass
class _Pending:
    """Frames of one collection received but not yet written."""

    triples: list[Triple] = field(default_factory=list)
    ids: list[Any] = field(default_factory=list)


class ImportSession:
    """One import socket: reads frames, writes them in batches, acknowledges or refuses each."""

    def __init__(self, ws: web.WebSocketResponse, dispatcher: Dispatcher, principal: Principal,
                 workspace: str | None, flow: str) -> None:  # fmt: skip
        self.ws = ws
        self.dispatcher = dispatcher
        self.principal = principal
        self.workspace = workspace
        self.flow = flow
        self._pending: dict[str, _Pending] = {}
        self._count = 0

    async def send(self, obj: dict[str, Any]) -> None:
        """A reply frame, unless the client has gone."""
        if not self.ws.closed:
            try:
                await self.ws.send_json(obj)
            except (ConnectionError, RuntimeError):
                pass

    async def run(self) -> None:
        """Serve frames until the client closes; what it sent before is written even if it left."""
        while not self.ws.closed:
            try:
                msg = await self.ws.receive(timeout=IDLE_FLUSH_S if self._count else None)
            except TimeoutError:
                await self.flush()
                continue
            if msg.type == WSMsgType.TEXT:
                await self.accept(msg.data)
            elif msg.type == WSMsgType.BINARY:
                await self.refuse([None], 0, GatewayError("bad-request", "binary frames are not supported"))
            else:
                break
        await self.flush()

    async def accept(self, text: str) -> None:
        """Buffer one frame (refused with its id if it does not parse); write when the batch is full."""
        try:
            wire = tr.loads(text)
            collection, triples = tr.import_frame(wire)
        except ValueError as e:  # BadRequest: this frame is refused, the others go on
            await self.refuse([_frame_id(text)], 0, GatewayError("bad-request", str(e)))
            return
        pending = self._pending.setdefault(collection, _Pending())
        pending.triples.extend(triples)
        pending.ids.append(wire["metadata"].get("id") if isinstance(wire.get("metadata"), dict) else None)
        self._count += len(triples)
        if self._count >= IMPORT_BATCH:
            await self.flush()

    async def flush(self) -> None:
        """Write every buffered frame; acknowledge what was stored, refuse what was not."""
        pending, self._pending, self._count = self._pending, {}, 0
        for collection, p in pending.items():
            try:
                stored = await self.dispatcher.import_triples(
                    self.principal, self.workspace, self.flow, collection, p.triples
                )
            except GatewayError as e:
                log.warning("triples import refused %d frames: %s", len(p.ids), e)
                await self.refuse(p.ids, len(p.triples), e)
                continue
            metrics.IMPORTED.inc(stored)
            await self.send({"ack": {"ids": p.ids, "frames": len(p.ids), "triples": len(p.triples)}})

    async def refuse(self, ids: list[Any], triples: int, e: GatewayError) -> None:
        """Tell the client these frames were not stored, and why."""
        await self.send({"error": e.to_wire(), "refused": {"ids": ids, "frames": len(ids), "triples": triples}})


def _frame_id(text: str) -> object:
    """The `metadata.id` of a frame that was refused, when it can still be read."""
    try:
        meta = tr.loads(text).get("metadata")
        return meta.get("id") if isinstance(meta, dict) else None
    except (ValueError, AttributeError):
        return tr.frame_id(text)
