"""REST endpoints and the bulk triples-import websocket.

- `POST /api/v1/flow/{flow}/service/{kind}`: a flow service, answered once (no streaming).
- `POST /api/v1/{kind}`: a workspace service (`flow`, `config`), dispatched on `operation`.
- `GET /api/v1/flow/{flow}/import/triples?token=&workspace=`: websocket of import frames, acknowledged
  (see importer.py); the only endpoint that reads a token from the URL (TrustGraph's bulk client sends
  it there), every other takes `Authorization: Bearer TOKEN`.
- `GET /api/v1/health` (flow names only with a valid token, when tokens are configured), `GET /api/metrics`
  (token required, when tokens are configured).
Errors are `{"error": {"type", "message"}}` with the HTTP status of their type (STATUS: 400 bad request,
404 unknown flow or service, 504 timeout, 401/403 auth, ...); answers are 200.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from aiohttp import WSCloseCode, web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from processors.gateway import metrics, tg_bulk, tg_metrics
from processors.gateway import tg_workspace as tgw
from processors.gateway import translate as tr
from processors.gateway.auth import Authenticator, AuthError, Principal
from processors.gateway.dispatch import Dispatcher
from processors.gateway.errors import GatewayError, as_gateway_errors
from processors.gateway.importer import ImportSession
from schemas.services import TRIPLES

log = logging.getLogger(__name__)
# HTTP status of each error type (others: 500).
STATUS = {
    "bad-request": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "unknown-flow": 404,
    "unknown-service": 404,
    "frame-too-large": 413,
    "busy": 429,
    "unavailable": 503,
    "timeout": 504,
}
# A TrustGraph service or operation kgflow does not have; a collection to delete that does not exist.
APPLICATION_ERRORS = ("not-supported", "unknown-collection")
# Services whose every error is answered 200 with the error in the body, as TrustGraph's gateway answers them:
# its library and collection commands print only `Status code N` for anything but a 200.
BODY_ERROR_SERVICES = ("librarian", "collection-management")


def _principal(request: web.Request, auth: Authenticator, url_token: bool = False) -> Principal:
    query = request.query.get("token") if url_token else None
    return auth.check_header(request.headers.get("Authorization"), query)


def error_response(type_: str, message: str, service: str = "") -> web.Response:
    """An error body with the status of its type. APPLICATION_ERRORS (and every error of BODY_ERROR_SERVICES)
    are answered 200 with the error in the body, as TrustGraph's own gateway answers application errors:
    trustgraph-cli shows only `Status code N` for anything but a 200."""
    in_body = type_ in APPLICATION_ERRORS or service in BODY_ERROR_SERVICES
    status = 200 if in_body else STATUS.get(type_, 500)
    return web.json_response({"error": {"type": type_, "message": message}}, status=status)


def _auth_response(e: AuthError) -> web.Response:
    return error_response(e.type if e.type == "forbidden" else "unauthorized", e.message)


async def json_object(request: web.Request, max_body_bytes: int) -> dict[str, Any]:
    """The request's JSON object; anything else is a GatewayError (bad-request, frame-too-large)."""
    if request.content_length is not None and request.content_length > max_body_bytes:
        raise GatewayError("frame-too-large", f"body of {request.content_length} bytes > {max_body_bytes}")
    try:
        body = tr.loads(await request.read())
    except tr.BadRequest as e:
        raise GatewayError("bad-request", str(e)) from None
    except web.HTTPRequestEntityTooLarge:
        raise GatewayError("frame-too-large", f"body larger than {max_body_bytes} bytes") from None
    if not isinstance(body, dict):
        raise GatewayError("bad-request", "body must be a JSON object")
    return body


class RestHandlers:
    """aiohttp handlers bound to one dispatcher."""

    def __init__(
        self, dispatcher: Dispatcher, auth: Authenticator, max_body_bytes: int, prometheus_url: str | None = None
    ) -> None:
        self.dispatcher = dispatcher
        self.auth = auth
        self.max_body_bytes = max_body_bytes
        self.prometheus_url = prometheus_url

    async def _answer(self, request: web.Request, service: str, flow: str | None) -> web.Response:
        began = time.perf_counter()
        try:
            principal = _principal(request, self.auth)
        except AuthError as e:
            return _auth_response(e)
        outcome = "ok"
        try:
            body = await json_object(request, self.max_body_bytes)
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
            return error_response(e.type, e.message, service)
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
        """Liveness; with a valid token (or no tokens configured), also the running flows."""
        try:
            _principal(request, self.auth)
        except AuthError:
            return web.json_response({"status": "ok"})
        cfg = self.dispatcher.config
        return web.json_response(
            {"status": "ok", "flows": sorted(cfg.flows), "config_version": cfg.version, "auth": self.auth.enabled}
        )

    async def metrics(self, request: web.Request) -> web.Response:
        """Prometheus text format (every kgflow metric of this process); a token is required when configured."""
        try:
            _principal(request, self.auth)
        except AuthError as e:
            return _auth_response(e)
        return web.Response(body=generate_latest(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def metrics_query(self, request: web.Request) -> web.Response:
        """`GET /api/metrics/{path}`: Prometheus' query API (tg_metrics.py); a token as for /api/metrics."""
        try:
            _principal(request, self.auth)
        except AuthError as e:
            return _auth_response(e)
        return await tg_metrics.answer(request, self.prometheus_url)

    async def document_stream(self, request: web.Request) -> web.Response:
        """`GET /api/v1/document-stream?document-id=&workspace=`: a library document's content."""
        try:
            user = _principal(request, self.auth).resolve(request.query.get("workspace"))
            doc_id = request.query.get("document-id") or ""
            with as_gateway_errors():
                content = await tgw.document_stream(self.dispatcher, user, doc_id)
        except AuthError as e:
            return _auth_response(e)
        except GatewayError as e:
            return error_response(e.type, e.message)
        return web.Response(body=content, content_type="application/octet-stream")

    async def _bulk_socket(self, request: web.Request) -> tuple[web.WebSocketResponse, Principal | None]:
        ws = web.WebSocketResponse(max_msg_size=self.max_body_bytes * 4, heartbeat=30.0)
        await ws.prepare(request)
        try:
            principal = _principal(request, self.auth, url_token=True)
            principal.resolve(request.query.get("workspace"))
        except AuthError as e:
            await ws.send_json({"error": {"type": e.type, "message": e.message}})
            await ws.close()
            return ws, None
        return ws, principal

    async def import_entity_contexts(self, request: web.Request) -> web.WebSocketResponse:
        """`tg-load-knowledge`'s entity contexts (tg_bulk.py): read, not stored."""
        ws, principal = await self._bulk_socket(request)
        if principal is not None:
            await tg_bulk.import_entity_contexts(ws)
        return ws

    async def export_document_embeddings(self, request: web.Request) -> web.WebSocketResponse:
        """`tg-save-doc-embeds` (tg_bulk.py): every chunk's embedding, then open until the client leaves."""
        ws, principal = await self._bulk_socket(request)
        if principal is not None:
            await tg_bulk.export_document_embeddings(
                ws, self.dispatcher, principal, request.query.get("workspace"), request.match_info["flow"]
            )
        return ws

    async def not_supported(self, request: web.Request) -> web.StreamResponse:
        """A TrustGraph endpoint kgflow does not have: refused at once (a websocket is accepted, told, closed)."""
        message = f"{request.path} ({tgw.endpoint_feature(request.path)}) is not supported by kgflow"
        if request.headers.get("Upgrade", "").lower() == "websocket":
            ws = web.WebSocketResponse()
            await ws.prepare(request)
            await ws.send_json({"error": {"type": "not-supported", "message": message}})
            await ws.close(code=WSCloseCode.UNSUPPORTED_DATA, message=b"not supported by kgflow")
            return ws
        return error_response("not-supported", message)

    async def import_triples(self, request: web.Request) -> web.WebSocketResponse:
        """Bulk import (importer.ImportSession): frames written in batches, acknowledged or refused."""
        ws = web.WebSocketResponse(max_msg_size=self.max_body_bytes * 4, heartbeat=30.0)
        await ws.prepare(request)
        flow, workspace = request.match_info["flow"], request.query.get("workspace")
        try:
            principal = _principal(request, self.auth, url_token=True)
            principal.resolve(workspace)
        except AuthError as e:
            await ws.send_json({"error": {"type": e.type, "message": e.message}})
            await ws.close()
            return ws
        await ImportSession(ws, self.dispatcher, principal, workspace, flow).run()
        return ws


def add_routes(app: web.Application, handlers: RestHandlers) -> None:
    """Register the REST routes (the socket route is added by the service)."""
    app.router.add_get("/api/v1/health", handlers.health)
    app.router.add_get("/api/metrics", handlers.metrics)
    app.router.add_get("/api/metrics/{path:.+}", handlers.metrics_query)
    app.router.add_get("/api/v1/document-stream", handlers.document_stream)
    app.router.add_get("/api/v1/flow/{flow}/import/triples", handlers.import_triples)
    app.router.add_post("/api/v1/flow/{flow}/service/{kind}", handlers.flow_service)
    app.router.add_post("/api/v1/{kind}", handlers.workspace_service)
    app.router.add_get("/api/v1/flow/{flow}/import/entity-contexts", handlers.import_entity_contexts)
    app.router.add_get("/api/v1/flow/{flow}/export/document-embeddings", handlers.export_document_embeddings)
    # TrustGraph endpoints kgflow does not have: other bulk import/export sockets, IAM's auth routes
    app.router.add_get("/api/v1/flow/{flow}/import/{kind}", handlers.not_supported)
    app.router.add_get("/api/v1/flow/{flow}/export/{kind}", handlers.not_supported)
    app.router.add_post("/api/v1/auth/{op}", handlers.not_supported)
