"""The gateway's MCP route: kgflow's MCP tools (mcp_tools.py) over streamable HTTP at `/mcp`.

Auth and workspace are the gateway's, checked on every HTTP request before MCP sees it: `Authorization:
Bearer TOKEN` (401 without a valid one, when tokens are configured), the workspace is the token's or
`X-Kgflow-Workspace` (403 for a workspace the token is not bound to), the flow `X-Kgflow-Flow`
(`default`). The tools then call the services through the gateway's dispatcher, as that workspace.
The server is stateless (each POST stands alone, answered as JSON), so a credential never outlives its
request and no session of one caller can be used by another.

The MCP SDK serves ASGI; `asgi_call` runs it inside aiohttp for one request.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import BaseModel

from processors.gateway import metrics
from processors.gateway.auth import Authenticator, AuthError
from processors.gateway.chat_format import FLOW_HEADER, WORKSPACE_HEADER
from processors.gateway.dispatch import DEFAULT_FLOW, Dispatcher
from processors.gateway.errors import GatewayError
from processors.gateway.mcp_tools import KgflowTools
from schemas.services import Service

PATH = "/mcp"
BINDING = "kgflow.binding"  # the ASGI scope key carrying the checked caller to the tools
ASGIMessage = MutableMapping[str, Any]
ASGIApp = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[ASGIMessage]], Callable[[ASGIMessage], Awaitable[None]]],
    Awaitable[None],
]
RAW = ("utf-8", "surrogateescape")  # aiohttp decodes header bytes so; encoding back gives them as sent
LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]


@dataclass(frozen=True)
class Binding:
    """Who an MCP request acts as: the workspace its token may use, and the flow it asked for."""

    user: str
    flow: str


def _binding(ctx: Context) -> Binding:
    request = ctx.request_context.request
    binding = getattr(request, "scope", {}).get(BINDING)
    if not isinstance(binding, Binding):  # only a request that came through McpRoute.handle has one
        raise ToolError("this MCP request did not come through the gateway's /mcp route")
    return binding


class DispatcherServices:
    """The tools' services through the gateway's dispatcher, as the request's workspace and flow."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher

    def user(self, ctx: Context) -> str:
        """The workspace the request's token may act in (checked by McpRoute.handle)."""
        return _binding(ctx).user

    async def stream(self, ctx: Context, service: Service, request: BaseModel) -> AsyncIterator[Any]:
        """The service's responses (GatewayError when the dispatcher refuses), counted in the gateway's metrics."""
        began, outcome = time.perf_counter(), "ok"
        try:
            async for res in self.dispatcher.ask(service, _binding(ctx).flow, request):
                yield res
        except GatewayError as e:
            outcome = e.type
            raise
        finally:
            metrics.REQUESTS.labels("mcp", metrics.service_label(service.name), outcome).inc()
            metrics.LATENCY.labels(metrics.service_label(service.name)).observe(time.perf_counter() - began)


class McpRoute:
    """`/mcp`: authenticates, binds the workspace, then hands the request to the MCP SDK."""

    def __init__(self, dispatcher: Dispatcher, auth: Authenticator, max_body_bytes: int, tls: bool) -> None:
        self.auth = auth
        server = KgflowTools(DispatcherServices(dispatcher)).server()
        server.streamable_http_app(
            streamable_http_path=PATH, stateless_http=True, json_response=True,
            max_request_body_size=max_body_bytes, transport_security=_security(auth.enabled, tls),
        )  # fmt: skip
        self.manager: StreamableHTTPSessionManager = server.session_manager
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    async def start(self, app: web.Application) -> None:
        """Run the SDK's request manager (its task group) beside the gateway."""
        ready = asyncio.Event()

        async def run() -> None:
            async with self.manager.run():
                ready.set()
                await self._stop.wait()

        self._task = asyncio.create_task(run(), name="mcp-manager")
        await ready.wait()

    async def stop(self, app: web.Application) -> None:
        """Stop the request manager (requests still running are cancelled)."""
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """One MCP HTTP request, as the workspace its token may act in."""
        try:
            principal = self.auth.check_header(request.headers.get("Authorization"))
            user = principal.resolve(request.headers.get(WORKSPACE_HEADER) or None)
        except AuthError as e:
            status = {"unauthorized": 401, "forbidden": 403}.get(e.type, 400)
            headers = {"WWW-Authenticate": 'Bearer realm="kgflow"'} if status == 401 else None
            return web.json_response({"error": {"type": e.type, "message": e.message}}, status=status, headers=headers)
        binding = Binding(user, request.headers.get(FLOW_HEADER) or DEFAULT_FLOW)
        return await asgi_call(self.manager.handle_request, request, {BINDING: binding})


def _security(token_required: bool, tls: bool) -> TransportSecuritySettings:
    """An open gateway listens on loopback only: there, refuse other Host and Origin headers (a web page
    reaching it by DNS rebinding); with a token, the token is the protection, whatever the host name."""
    if token_required:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    scheme = "https" if tls else "http"
    origins = [f"{scheme}://{h}" for h in LOOPBACK_HOSTS]
    return TransportSecuritySettings(allowed_hosts=LOOPBACK_HOSTS, allowed_origins=origins)


async def asgi_call(app: ASGIApp, request: web.Request, extra: dict[str, Any]) -> web.StreamResponse:
    """Run an ASGI application for one aiohttp request (its body read whole first), `extra` in its scope."""
    body = await request.read()
    peer = request.transport.get_extra_info("peername") if request.transport else None
    scope: dict[str, Any] = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": f"{request.version.major}.{request.version.minor}",
        "method": request.method, "scheme": request.scheme, "path": request.path, "root_path": "",
        "raw_path": request.raw_path.split("?", 1)[0].encode(*RAW), "query_string": request.query_string.encode(*RAW),
        "headers": [(k.lower().encode(*RAW), v.encode(*RAW)) for k, v in request.headers.items()],
        "client": tuple(peer[:2]) if isinstance(peer, tuple) else None, **extra,
    }  # fmt: skip
    finished = asyncio.Event()
    body_sent = False
    response: web.StreamResponse | None = None

    async def receive() -> ASGIMessage:
        nonlocal body_sent
        if not body_sent:
            body_sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await finished.wait()  # the app waits here for a disconnect: there is none until it answered
        return {"type": "http.disconnect"}

    async def send(message: ASGIMessage) -> None:
        nonlocal response
        if message["type"] == "http.response.start":
            response = web.StreamResponse(status=message["status"])
            for k, v in message.get("headers", []):
                response.headers.add(k.decode(*RAW), v.decode(*RAW))
        elif message["type"] == "http.response.body" and response is not None:
            if not response.prepared:
                await response.prepare(request)
            await response.write(message.get("body", b""))
            if not message.get("more_body", False):
                await response.write_eof()

    try:
        await app(scope, receive, send)
    finally:
        finished.set()
    if response is None:
        raise web.HTTPInternalServerError(text="the MCP server sent no response")
    if not response.prepared:
        await response.prepare(request)
        await response.write_eof()
    return response


async def _no_stream(request: web.Request) -> web.Response:
    """GET (a stream of server-initiated messages) and DELETE (end a session): a stateless server has
    neither, and says so as the MCP spec asks (405), instead of holding a stream open that never speaks."""
    return web.json_response({"error": {"type": "method-not-allowed", "message": "POST MCP requests to /mcp"}},
                             status=405, headers={"Allow": "POST"})  # fmt: skip


def add_mcp_route(app: web.Application, route: McpRoute) -> None:
    """Register `/mcp` and its request manager."""
    app.router.add_post(PATH, route.handle)
    app.router.add_get(PATH, _no_stream, allow_head=False)
    app.router.add_delete(PATH, _no_stream)
    app.on_startup.append(route.start)
    app.on_cleanup.append(route.stop)
