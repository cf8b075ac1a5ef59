"""ConfigWatcher: how a processor learns the current flows, at start and on change."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from processors.base.bus import Bus, Consumer, follow
from processors.base.client import RemoteError, RequestResponseClient, RequestTimeout
from processors.base.tasks import cancel_and_close
from schemas.flows import ConfigState, FlowRequest, FlowResponse
from schemas.topics import CONFIG_PUSH, CONFIG_REQUEST, CONFIG_RESPONSE

log = logging.getLogger(__name__)
CONFIG_TIMEOUT_S = 30.0  # a flow-registry request (the registry answers from memory)


def config_client(bus: Bus, timeout_s: float = CONFIG_TIMEOUT_S) -> RequestResponseClient[FlowResponse]:
    """A client of the flow registry (config service)."""
    return RequestResponseClient(bus, CONFIG_REQUEST, CONFIG_RESPONSE, FlowResponse, timeout_s)


class ConfigWatcher:
    """Reads config pushes and fetches the current config once at start.

    The callback sees versions in increasing order only, one at a time.
    """

    def __init__(self, bus: Bus, on_config: Callable[[ConfigState], Awaitable[None]]) -> None:
        self._bus = bus
        self._on_config = on_config
        self._version = -1
        self._lock = asyncio.Lock()
        self._reader: Consumer | None = None
        self._task: asyncio.Task[None] | None = None
        self._client = config_client(bus)

    async def start(self, fetch_timeout_s: float = 120.0) -> None:
        """Subscribe to pushes, then fetch the current config (retrying until the registry answers)."""
        self._reader = await self._bus.reader(CONFIG_PUSH)
        self._task = asyncio.create_task(
            follow(self._reader, ConfigState, self._pushed, "config push"), name="config-watch"
        )
        deadline = asyncio.get_running_loop().time() + fetch_timeout_s
        while True:
            try:
                res = await self._client.request(FlowRequest(operation="get-config"), timeout_s=5.0)
                break
            except (RequestTimeout, RemoteError) as e:
                if asyncio.get_running_loop().time() > deadline:
                    raise RuntimeError("flow registry (config service) did not answer") from e
                log.info("waiting for the flow registry")
        if res.config is not None:
            await self._apply(res.config)

    async def stop(self) -> None:
        """Stop following config changes."""
        await cancel_and_close(self._task, self._reader)
        await self._client.stop()

    async def _pushed(self, state: ConfigState) -> None:
        try:
            await self._apply(state)
        except Exception:  # the next push may apply: the watcher keeps following
            log.exception("applying config failed")

    async def _apply(self, state: ConfigState) -> None:
        async with self._lock:
            if state.version <= self._version:
                return
            self._version = state.version
            await self._on_config(state)
