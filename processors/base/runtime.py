"""Assemble processors into a running system: all in one process, or one per process."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from processors.base.bus import Bus, MemoryBus
from processors.base.flow_registry import load_blueprint
from processors.base.metrics import PROCESSOR_INFO
from processors.base.registry import CONFIG, FLOW_PROCESSORS, processor_entry
from processors.base.settings import RuntimeSettings
from processors.stores.settings import StoreSettings
from schemas.flows import FlowRequest

if TYPE_CHECKING:
    from processors.stores.factory import Stores

# The repo's flows/ (source checkout, editable install), else the copy a wheel installs.
FLOWS_DIR = next(
    (
        d
        for d in (Path(__file__).resolve().parents[2] / "flows", Path(sys.prefix) / "share" / "kgflow" / "flows")
        if d.is_dir()
    ),
    Path(sys.prefix) / "share" / "kgflow" / "flows",
)
DEFAULT_FLOW = "default"


def make_bus(rt: RuntimeSettings) -> Bus:
    """The bus the settings name."""
    if rt.bus == "pulsar":
        try:
            from processors.base.pulsar_bus import PulsarBus
        except ImportError as e:  # pulsar-client is in the `distributed` extra
            raise RuntimeError(f"the Pulsar bus needs pip install 'kgflow[distributed]' ({e})") from None
        return PulsarBus(rt.pulsar_url)
    return MemoryBus()


def default_blueprint_path() -> Path:
    """The shipped blueprint of flow `default`: every service."""
    return FLOWS_DIR / "default.yaml"


@dataclass
class System:
    """Running processors sharing one bus (and, when needed, one set of stores)."""

    bus: Bus
    store_settings: StoreSettings
    runtime: RuntimeSettings
    processors: list[Any] = field(default_factory=list)
    _stores: Stores | None = None

    @property
    def stores(self) -> Stores:
        """The stores, opened on first use."""
        if self._stores is None:
            from processors.stores.factory import open_stores

            self._stores = open_stores(self.store_settings)
        return self._stores

    def __post_init__(self) -> None:
        limit_blas_threads(self.runtime.blas_threads)

    def build(self, name: str) -> Any:
        """Instantiate processor `name` (see `processors.base.registry`)."""
        return processor_entry(name).load().create(self)

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

    def processor(self, name: str) -> Any:
        """A started processor by name."""
        return next(p for p in self.processors if getattr(p, "name", None) == name)


def limit_blas_threads(threads: int) -> None:
    """At most `threads` BLAS threads in this process from now on (numpy's vector search and
    ranking are small products: a second thread saves little and spins while idle)."""
    # threadpoolctl limits only BLAS libraries already loaded (a `kgflow run` process imports
    # numpy later, and kept two spinning threads; figures in bench/README.md)
    import numpy  # noqa: F401
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads, user_api="blas")


async def ensure_default_flow(bus: Bus, flow_id: str = DEFAULT_FLOW, params: dict[str, Any] | None = None) -> None:
    """Put (or update) the shipped default blueprint and start flow `flow_id` unless it runs."""
    from processors.base.config_client import config_client

    client = config_client(bus)
    try:
        bp = load_blueprint(default_blueprint_path())
        names = (await client.request(FlowRequest(operation="list-blueprints"))).blueprint_names or []
        stored = None
        if bp.name in names:
            stored = (await client.request(FlowRequest(operation="get-blueprint", blueprint_name=bp.name))).blueprint
        if stored != bp:  # new, or shipped by an older kgflow: processors follow the update
            await client.request(FlowRequest(operation="put-blueprint", blueprint=bp))
        flows = (await client.request(FlowRequest(operation="list-flows"))).flow_ids or []
        if flow_id not in flows:
            await client.request(
                FlowRequest(operation="start-flow", flow_id=flow_id, blueprint_name=bp.name, parameters=params or {})
            )
    finally:
        await client.stop()


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
