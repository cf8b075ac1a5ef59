"""GatewayProcessor: the TrustGraph-compatible HTTP/websocket front door of kgflow (aiohttp).

Talks to processors only over the bus. Started by `kgflow up` or alone with `kgflow run gateway`
(port: GatewaySettings.port). It listens on 127.0.0.1 unless told otherwise (`KGFLOW_GATEWAY_HOST`),
and beyond loopback only with a token; with `tls_cert` + `tls_key` it speaks HTTPS / WSS.
"""

from __future__ import annotations

import contextlib
import logging
import ssl
from pathlib import Path

from aiohttp import WSCloseCode, web
from pydantic import BaseModel, Field

from processors.base.bus import Bus
from processors.base.metrics import PROCESSOR_INFO
from processors.base.registry import Host
from processors.base.settings import RuntimeSettings, from_env
from processors.gateway import explorer, openapi
from processors.gateway.auth import Authenticator
from processors.gateway.chat import OpenAIRoutes, add_openai_routes
from processors.gateway.chat_ollama import OllamaRoutes, add_ollama_routes
from processors.gateway.dispatch import Dispatcher
from processors.gateway.mcp_http import McpRoute, add_mcp_route
from processors.gateway.rest import RestHandlers, add_routes
from processors.gateway.socket import SocketLimits, SocketSession
from processors.gateway.spec_routes import SpecRoutes, add_spec_routes
from processors.gateway.tg_uploads import chunk_bytes
from schemas.prompts import Prompts

log = logging.getLogger(__name__)
LOOPBACK = "127.0.0.1"
LOOPBACKS = (LOOPBACK, "localhost", "::1")


class GatewaySettings(BaseModel):
    """Gateway settings (environment KGFLOW_GATEWAY_<FIELD>)."""

    token: str | None = None
    token_file: str | None = None
    host: str = LOOPBACK  # another address (e.g. 0.0.0.0) needs a token
    port: int = Field(default=8888, ge=0, le=65535)  # 0: any free port
    tls_cert: str | None = None  # PEM certificate (chain) file: serve HTTPS / WSS
    tls_key: str | None = None  # its PEM private key file
    max_frame_bytes: int = Field(default=1 << 20, ge=1024)
    max_inflight: int = Field(default=64, ge=1, le=10000)
    prometheus_url: str | None = None  # a Prometheus server for /api/metrics/query (else this process's metrics)


def tls_context(settings: GatewaySettings) -> ssl.SSLContext | None:
    """The server TLS context of `tls_cert` + `tls_key` (None when neither is set)."""
    if not settings.tls_cert and not settings.tls_key:
        return None
    if not (settings.tls_cert and settings.tls_key):
        raise ValueError("TLS needs both KGFLOW_GATEWAY_TLS_CERT and KGFLOW_GATEWAY_TLS_KEY")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        ctx.load_cert_chain(settings.tls_cert, settings.tls_key)
    except (OSError, ssl.SSLError) as e:
        raise ValueError(f"cannot load KGFLOW_GATEWAY_TLS_CERT / KGFLOW_GATEWAY_TLS_KEY: {e}") from None
    return ctx


class GatewayProcessor:
    """Serves `/api/v1/socket`, the REST API, the specs' endpoints (`/api/v1/lazy-rag/...`, `/retrieve`),
    triples import, health, metrics, the chat routes (OpenAI's `/v1/...`, Ollama's `/api/chat` ...), the
    explorer page (`/`) and the API's description (`/openapi.json`, `/docs`)."""

    name = "gateway"

    def __init__(
        self,
        bus: Bus,
        runtime: RuntimeSettings,
        settings: GatewaySettings | None = None,
        home: Path | None = None,
        prompts: Prompts | None = None,
    ) -> None:
        self.bus = bus
        self.settings = settings or from_env(GatewaySettings, prefix="KGFLOW_GATEWAY_")
        self.auth = Authenticator.from_env(self.settings.token, self.settings.token_file)
        # home: where TrustGraph's library lives; prompts: the services' own, shown by the config service
        self.dispatcher = Dispatcher(bus, runtime.request_timeout_s, home, prompts)
        if self.dispatcher.library is not None:  # an upload's chunks are sized to fit this gateway's frame
            self.dispatcher.library.chunk_bytes = chunk_bytes(self.settings.max_frame_bytes)
        self.limits = SocketLimits(
            max_frame_bytes=self.settings.max_frame_bytes,
            max_inflight=self.settings.max_inflight,
            request_timeout_s=runtime.request_timeout_s,
        )
        self._runner: web.AppRunner | None = None
        self.host: str = LOOPBACK
        self.port: int | None = None
        self.scheme = "http"
        # Open client sockets, closed on shutdown: aiohttp would otherwise wait for each to end (a page
        # like the explorer keeps one open while it is shown), which holds `kgflow up` for its shutdown
        # timeout after Ctrl-C and leaves the client unaware that the gateway is going.
        self._sockets: set[web.WebSocketResponse] = set()

    @classmethod
    def create(cls, host: Host) -> GatewayProcessor:
        """A gateway on the host's bus (settings from KGFLOW_GATEWAY_*)."""
        return cls(host.bus, host.runtime, home=host.home, prompts=host.prompts)

    def app(self) -> web.Application:
        """The aiohttp application."""
        app = web.Application(client_max_size=self.settings.max_frame_bytes)
        app.router.add_get("/api/v1/socket", self._socket)
        add_spec_routes(app, SpecRoutes(self.dispatcher, self.auth, self.settings.max_frame_bytes))
        add_routes(
            app, RestHandlers(self.dispatcher, self.auth, self.settings.max_frame_bytes, self.settings.prometheus_url)
        )
        add_openai_routes(app, OpenAIRoutes(self.dispatcher, self.auth, self.settings.max_frame_bytes))
        add_ollama_routes(app, OllamaRoutes(self.dispatcher, self.auth, self.settings.max_frame_bytes))
        tls = bool(self.settings.tls_cert)
        add_mcp_route(app, McpRoute(self.dispatcher, self.auth, self.settings.max_frame_bytes, tls))
        explorer.add_routes(app)
        openapi.add_routes(app)
        app.on_shutdown.append(self._close_sockets)
        return app

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        session = SocketSession(self.dispatcher, self.auth, self.limits)
        self._sockets.add(session.ws)
        try:
            return await session.run(request)
        finally:
            self._sockets.discard(session.ws)

    async def _close_sockets(self, app: web.Application) -> None:
        """On shutdown: close every client socket with 1001 (going away), so clients know to reconnect."""
        for ws in list(self._sockets):
            await ws.close(code=WSCloseCode.GOING_AWAY, message=b"gateway shutting down")

    async def start(self, port: int | None = None, host: str | None = None) -> None:
        """Follow the flow registry, then listen on `host:port` (defaults: the settings'); an address
        beyond loopback needs a token."""
        port = self.settings.port if port is None else port
        self.host = host or self.settings.host
        if self.host not in LOOPBACKS and not self.auth.enabled:
            raise ValueError(
                f"the gateway binds {self.host} (beyond loopback) only with a token: set KGFLOW_GATEWAY_TOKEN "
                "or KGFLOW_GATEWAY_TOKEN_FILE"
            )
        ssl_context = tls_context(self.settings)
        await self.dispatcher.start()
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, port, ssl_context=ssl_context)
        try:
            await site.start()
        except OSError as e:
            await self.stop()
            raise RuntimeError(
                f"the gateway cannot listen on {self.host}:{port} ({e.strerror or e}); "
                "choose another with --gateway-port or KGFLOW_GATEWAY_PORT"
            ) from None
        sockets = getattr(site._server, "sockets", None) or []  # noqa: SLF001 - the bound port when port=0
        self.port = sockets[0].getsockname()[1] if sockets else port
        self.scheme = "https" if ssl_context else "http"
        PROCESSOR_INFO.labels(self.name).set(1)
        notes = ["token required" if self.auth.enabled else "no token: loopback only"]
        if ssl_context is None and self.host not in LOOPBACKS:
            notes.append("plain HTTP beyond loopback: set KGFLOW_GATEWAY_TLS_CERT and KGFLOW_GATEWAY_TLS_KEY")
        log.warning("gateway listening on %s://%s:%s/ (%s)", self.scheme, self.host, self.port, "; ".join(notes))

    @property
    def url(self) -> str:
        """The base URL to open (the explorer's page); a wildcard bind address is reached on loopback."""
        host = LOOPBACK if self.host in ("0.0.0.0", "::", "") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"{self.scheme}://{host}:{self.port}/"

    async def stop(self) -> None:
        """Stop listening and release the bus clients."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
            with contextlib.suppress(KeyError):
                PROCESSOR_INFO.remove(self.name)
        await self.dispatcher.stop()

    def __repr__(self) -> str:
        return f"GatewayProcessor(host={self.host!r}, port={self.port!r}, auth={self.auth.enabled})"
