"""GatewayProcessor: the TrustGraph-compatible HTTP/websocket front door of kgflow (aiohttp).

Talks to processors only over the bus. Started by `kgflow up` or alone with `kgflow run gateway`
(port: GatewaySettings.port). Without a configured token it listens on 127.0.0.1 only.
"""

from __future__ import annotations

import logging

from aiohttp import web
from pydantic import BaseModel, Field

from processors.base.bus import Bus
from processors.base.processor import Host
from processors.base.settings import RuntimeSettings, from_env
from processors.gateway.auth import Authenticator
from processors.gateway.dispatch import Dispatcher
from processors.gateway.rest import RestHandlers, add_routes
from processors.gateway.socket import SocketLimits, SocketSession

log = logging.getLogger(__name__)
LOOPBACK = "127.0.0.1"


class GatewaySettings(BaseModel):
    """Gateway settings (environment KGFLOW_GATEWAY_<FIELD>)."""

    token: str | None = None
    token_file: str | None = None
    host: str = "0.0.0.0"  # used only when a token is configured
    port: int = Field(default=8888, ge=0, le=65535)  # 0: any free port
    max_frame_bytes: int = Field(default=1 << 20, ge=1024)
    max_inflight: int = Field(default=64, ge=1, le=10000)


class GatewayProcessor:
    """Serves `/api/v1/socket`, the REST API, triples import, health and metrics."""

    name = "gateway"

    def __init__(self, bus: Bus, runtime: RuntimeSettings, settings: GatewaySettings | None = None) -> None:
        self.bus = bus
        self.settings = settings or from_env(GatewaySettings, prefix="KGFLOW_GATEWAY_")
        self.auth = Authenticator.from_env(self.settings.token, self.settings.token_file)
        self.dispatcher = Dispatcher(bus, runtime.request_timeout_s)
        self.limits = SocketLimits(
            max_frame_bytes=self.settings.max_frame_bytes,
            max_inflight=self.settings.max_inflight,
            request_timeout_s=runtime.request_timeout_s,
        )
        self._runner: web.AppRunner | None = None
        self.host: str = LOOPBACK
        self.port: int | None = None

    @classmethod
    def create(cls, host: Host) -> GatewayProcessor:
        """A gateway on the host's bus (settings from KGFLOW_GATEWAY_*)."""
        return cls(host.bus, host.runtime)

    def app(self) -> web.Application:
        """The aiohttp application."""
        app = web.Application(client_max_size=self.settings.max_frame_bytes)
        app.router.add_get("/api/v1/socket", self._socket)
        add_routes(app, RestHandlers(self.dispatcher, self.auth, self.settings.max_frame_bytes))
        return app

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        return await SocketSession(self.dispatcher, self.auth, self.limits).run(request)

    async def start(self, port: int | None = None, host: str | None = None) -> None:
        """Follow the flow registry, then listen on `port` (default: the settings') — loopback
        only unless a token is configured."""
        port = self.settings.port if port is None else port
        await self.dispatcher.start()
        if self.auth.enabled:
            self.host = host or self.settings.host
        else:
            if host not in (None, LOOPBACK, "localhost"):
                raise ValueError("the gateway binds beyond loopback only with a token (KGFLOW_GATEWAY_TOKEN)")
            self.host = LOOPBACK
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, port)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or []  # noqa: SLF001 - the bound port when port=0
        self.port = sockets[0].getsockname()[1] if sockets else port
        if self.auth.enabled:
            msg = f"gateway listening on http://{self.host}:{self.port}/ (token required)"
        else:
            msg = (
                f"gateway listening on http://{LOOPBACK}:{self.port}/ — loopback only: no token configured "
                "(set KGFLOW_GATEWAY_TOKEN or KGFLOW_GATEWAY_TOKEN_FILE to accept remote clients)"
            )
        log.warning(msg)

    async def stop(self) -> None:
        """Stop listening and release the bus clients."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.dispatcher.stop()

    def __repr__(self) -> str:
        return f"GatewayProcessor(host={self.host!r}, port={self.port!r}, auth={self.auth.enabled})"
