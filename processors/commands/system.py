"""Assemble processors into a running system: all in one process, or one per process."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from processors.base.bus import Bus, MemoryBus
from processors.base.metrics import PROCESSOR_INFO
from processors.base.offload import set_batch_niceness
from processors.base.registry import Runnable
from processors.base.runtime import ensure_default_flow, limit_blas_threads
from processors.base.settings import ParamModels, RuntimeSettings
from processors.commands.catalog import CONFIG, FLOW_PROCESSORS, PARAMS, PROMPTS, processor_entry
from processors.stores.settings import StoreSettings
from schemas.prompts import Prompts

if TYPE_CHECKING:  # opened on first use: a process that needs no stores loads no backend
    from processors.stores.factory import Stores


@dataclass
class System:
    """Running processors sharing one bus (and, when needed, one set of stores)."""

    bus: Bus
    store_settings: StoreSettings
    runtime: RuntimeSettings
    processors: list[Runnable] = field(default_factory=list)
    _stores: Stores | None = None

    @property
    def stores(self) -> Stores:
        """The stores, opened on first use."""
        if self._stores is None:
            from processors.stores.factory import open_stores

            self._stores = open_stores(self.store_settings)
        return self._stores

    @property
    def home(self) -> Path:
        """The folder the process keeps its state in (the stores' home)."""
        return self.store_settings.home

    def __post_init__(self) -> None:
        limit_blas_threads(self.runtime.blas_threads)
        set_batch_niceness(self.runtime.indexing_nice)

    @property
    def param_models(self) -> ParamModels:
        """Each processor's flow-parameter model (the config service checks flows against them)."""
        return PARAMS

    @property
    def prompts(self) -> Prompts:
        """The services' own prompts by id (the gateway shows them)."""
        return PROMPTS

    def build(self, name: str) -> Runnable:
        """Instantiate processor `name` (see `processors.commands.catalog`)."""
        return processor_entry(name).build(self)

    async def start(self, names: tuple[str, ...] | list[str]) -> None:
        """Start processors in order (the config service first if listed)."""
        for name in names:
            proc = self.build(name)
            await proc.start()
            self.processors.append(proc)
            PROCESSOR_INFO.labels(getattr(proc, "name", name)).set(1)

    async def stop(self) -> None:
        """Stop everything in reverse order and close the stores and the bus."""
        for proc in reversed(self.processors):
            with contextlib.suppress(Exception):
                await proc.stop()
            with contextlib.suppress(KeyError):
                PROCESSOR_INFO.remove(getattr(proc, "name", ""))
        self.processors.clear()
        if self._stores is not None:
            await self._stores.close()
        await self.bus.close()

    def processor(self, name: str) -> Runnable:
        """A started processor by name."""
        return next(p for p in self.processors if getattr(p, "name", None) == name)


@contextlib.asynccontextmanager
async def embedded(
    store: StoreSettings,
    rt: RuntimeSettings | None = None,
    flow_params: dict[str, Any] | None = None,
    bus: Bus | None = None,
) -> AsyncIterator[System]:
    """Every processor in this process on a memory bus (or on `bus`, which it then owns), serving
    flow `default`."""
    rt = rt or RuntimeSettings()
    system = System(bus or MemoryBus(), store, rt)
    try:
        await system.start([CONFIG.name])
        await ensure_default_flow(system.bus, params=flow_params)
        await system.start([p.name for p in FLOW_PROCESSORS])
        yield system
    finally:
        await system.stop()
