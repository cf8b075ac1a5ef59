"""REST endpoints and the bulk triples-import websocket.

- `POST /api/v1/flow/{flow}/service/{kind}`: a flow service, answered once (no streaming).
- `POST /api/v1/{kind}`: a workspace service (`flow`, `config`), dispatched on `operation`.
- `GET /api/v1/flow/{flow}/import/triples?token=&workspace=`: websocket of import frames (no replies).
- `GET /api/v1/health`, `GET /api/metrics`.
Service errors come back as HTTP 200 `{"error": {"type", "message"}}` (as TrustGraph clients expect);
an unreadable body is 400, a missing or wrong token 401/403.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from aiohttp import WSMsgType, web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from processors.gateway import metrics
from processors.gateway.auth import Authenticator, AuthError, Principal
from processors.gateway.dispatch import Dispatcher, GatewayError
from processors.gateway.translate import import_frame
from schemas.services import TRIPLES
from schemas.terms import Triple
from schemas.triples import MAX_BATCH

log = logging.getLogger(__name__)
IMPORT_BATCH = MAX_BATCH  # triples buffered per import socket before they are written (one StoreTriples)


def _principal(request: web.Request, auth: Authenticator) -> Principal:
    return auth.check_header(request.headers.get("Authorization"), request.query.get("token"))


def _auth_response(e: AuthError) -> web.Response:
    status = 403 if e.type == "forbidden" else 401
    return web.json_response({"error": {"type": e.type, "message": e.message}}, status=status)


class RestHandlers:
    """aiohttp handlers bound to one dispatcher."""

    def __init__(self, dispatcher: Dispatcher, auth: Authenticator, max_body_bytes: int) -> None:
        self.dispatcher = dispatcher
        self.auth = auth
        self.max_body_bytes = max_body_bytes

    async def _body(self, request: web.Request) -> dict[str, Any]:
        if request.content_length is not None and request.content_length > self.max_body_bytes:
            raise web.HTTPRequestEntityTooLarge(max_size=self.max_body_bytes, actual_size=request.content_length)
        try:
            body = await request.json()
        except ValueError as e:
            raise web.HTTPBadRequest(
                text=json.dumps({"error": {"type": "bad-request", "message": f"malformed JSON: {e}"}}),
                content_type="application/json",
            ) from None
        if not isinstance(body, dict):
            raise web.HTTPBadRequest(
                text=json.dumps({"error": {"type": "bad-request", "message": "body must be a JSON object"}}),
                content_type="application/json",
            )
        return body

    async def _answer(self, request: web.Request, service: str, flow: str | None) -> web.Response:
        began = time.perf_counter()
        try:
            principal = _principal(request, self.auth)
        except AuthError as e:
            return _auth_response(e)
        body = await self._body(request)
        outcome = "ok"
        try:
            last: dict[str, Any] = {}
            collected: list[dict[str, Any]] = []
            frames = self.dispatcher.handle(principal, body.get("workspace"), service, flow, body, False)
            async for payload, _complete in frames:
                last = payload
                collected.append(payload)
            if service == TRIPLES.name and len(collected) > 1:  # never happens without streaming; be safe
                last = {"response": [t for p in collected for t in p.get("response", [])]}
            return web.json_response(last)
        except GatewayError as e:
            outcome = e.type
            return web.json_response({"error": e.to_wire()})
        finally:
            metrics.REQUESTS.labels("rest", metrics.service_label(service), outcome).inc()
            metrics.LATENCY.labels(metrics.service_label(service)).observe(time.perf_counter() - began)

    async def flow_service(self, request: web.Request) -> web.Response:
        """`POST /api/v1/flow/{flow}/service/{kind}`."""
        return await self._answer(request, request.match_info["kind"], request.match_info["flow"])

    async def workspace_service(self, request: web.Request) -> web.Response:
        """`POST /api/v1/{kind}`."""
        return await self._answer(request, request.match_info["kind"], None)

    async def health(self, request: web.Request) -> web.Response:
        """Liveness plus what the gateway knows of the running flows."""
        cfg = self.dispatcher.config
        return web.json_response(
            {"status": "ok", "flows": sorted(cfg.flows), "config_version": cfg.version, "auth": self.auth.enabled}
        )

    async def metrics(self, request: web.Request) -> web.Response:
        """Prometheus text format (every kgflow metric of this process)."""
        return web.Response(body=generate_latest(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def import_triples(self, request: web.Request) -> web.WebSocketResponse:
        """Bulk import: frames of triples, buffered and written in batches; errors are sent back."""
        ws = web.WebSocketResponse(max_msg_size=self.max_body_bytes * 4, heartbeat=30.0)
        try:
            principal: Principal | None = _principal(request, self.auth)
        except AuthError as e:
            principal = None
            failure = e
        await ws.prepare(request)
        if principal is None:
            await ws.send_json({"error": {"type": failure.type, "message": failure.message}})
            await ws.close()
            return ws
        flow, workspace = request.match_info["flow"], request.query.get("workspace")
        try:
            principal.resolve(workspace)
        except AuthError as e:
            await ws.send_json({"error": {"type": e.type, "message": e.message}})
            await ws.close()
            return ws
        buffered: dict[str, list[Triple]] = {}
        count = 0

        async def flush() -> None:
            nonlocal count
            for collection, triples in list(buffered.items()):
                n = await self.dispatcher.import_triples(principal, workspace, flow, collection, triples)
                metrics.IMPORTED.inc(n)
            buffered.clear()
            count = 0

        try:
            async for msg in ws:
                if msg.type != WSMsgType.TEXT:
                    continue
                try:
                    collection, triples = import_frame(json.loads(msg.data))
                except ValueError as e:  # BadRequest or malformed JSON: this frame is refused, the rest go on
                    await ws.send_json({"error": {"type": "bad-request", "message": str(e)}})
                    continue
                buffered.setdefault(collection, []).extend(triples)
                count += len(triples)
                if count >= IMPORT_BATCH:
                    await flush()
            await flush()  # the client may already be gone: what it sent is still written
        except GatewayError as e:
            log.warning("triples import failed: %s", e)
            if not ws.closed:
                await ws.send_json({"error": e.to_wire()})
        return ws


def add_routes(app: web.Application, handlers: RestHandlers) -> None:
    """Register the REST routes (the socket route is added by the service)."""
    app.router.add_get("/api/v1/health", handlers.health)
    app.router.add_get("/api/metrics", handlers.metrics)
    app.router.add_get("/api/v1/flow/{flow}/import/triples", handlers.import_triples)
    app.router.add_post("/api/v1/flow/{flow}/service/{kind}", handlers.flow_service)
    app.router.add_post("/api/v1/{kind}", handlers.workspace_service)
