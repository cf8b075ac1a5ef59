"""Assemble processors into a running system: all in one process, or one per process."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from processors.base.bus import Bus, MemoryBus
from processors.base.flow_registry import ConfigService, FlowRegistry, load_blueprint
from processors.base.processor import FlowProcessor
from processors.base.settings import RuntimeSettings, StoreSettings
from processors.stores.factory import Stores, open_stores
from schemas.flows import FlowRequest

# The repo's flows/ (source checkout, editable install), else the copy a wheel installs.
FLOWS_DIR = next(
    (
        d
        for d in (Path(__file__).resolve().parent.parent / "flows", Path(sys.prefix) / "share" / "kgflow" / "flows")
        if d.is_dir()
    ),
    Path(sys.prefix) / "share" / "kgflow" / "flows",
)
DEFAULT_BLUEPRINT = "graph-rag"
DEFAULT_FLOW = "default"
PROCESSOR_NAMES = (
    "config",
    "embeddings",
    "graph-embeddings",
    "triples",
    "label-resolver",
    "graph-rag",
    "text-completion",
)


def make_bus(rt: RuntimeSettings) -> Bus:
    """The bus the settings name."""
    if rt.bus == "pulsar":
        from processors.base.pulsar_bus import PulsarBus

        return PulsarBus(rt.pulsar_url)
    return MemoryBus()


def default_blueprint_path() -> Path:
    """The shipped graph-rag blueprint."""
    return FLOWS_DIR / "graph-rag.yaml"


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
            self._stores = open_stores(self.store_settings)
        return self._stores

    def build(self, name: str) -> Any:
        """Instantiate processor `name`."""
        kw: dict[str, Any] = {
            "concurrency": self.runtime.concurrency,
            "request_timeout_s": self.runtime.request_timeout_s,
            "max_redeliveries": self.runtime.max_redeliveries,
        }
        if name == "config":
            return ConfigService(self.bus, FlowRegistry(self.store_settings.home / "flows.json"))
        if name == "embeddings":
            from processors.embeddings.service import EmbeddingsProcessor

            return EmbeddingsProcessor(self.bus, **kw)
        if name == "graph-embeddings":
            from processors.graph_embeddings.service import GraphEmbeddingsProcessor

            return GraphEmbeddingsProcessor(self.bus, self.stores.entities, **kw)
        if name == "triples":
            from processors.triples.service import TriplesProcessor

            return TriplesProcessor(self.bus, self.stores, **kw)
        if name == "label-resolver":
            from processors.label_resolver.service import LabelResolverProcessor

            return LabelResolverProcessor(self.bus, **kw)
        if name == "graph-rag":
            from processors.graph_rag.service import GraphRagProcessor

            return GraphRagProcessor(self.bus, **kw)
        if name == "text-completion":
            from processors.text_completion.service import TextCompletionProcessor

            return TextCompletionProcessor(self.bus, **kw)
        if name == "gateway":
            from processors.gateway.service import GatewayProcessor

            return GatewayProcessor(self.bus, **kw)
        raise ValueError(f"unknown processor {name!r}; known: {', '.join(PROCESSOR_NAMES)}")

    async def start(self, names: tuple[str, ...] | list[str]) -> None:
        """Start processors in order (the config service first if listed)."""
        for name in names:
            proc = self.build(name)
            await proc.start()
            self.processors.append(proc)

    async def stop(self) -> None:
        """Stop everything in reverse order and close the stores and the bus."""
        for proc in reversed(self.processors):
            with contextlib.suppress(Exception):
                await proc.stop()
        self.processors.clear()
        if self._stores is not None:
            await self._stores.close()
        await self.bus.close()

    def processor(self, name: str) -> FlowProcessor:
        """A started processor by name."""
        return next(p for p in self.processors if getattr(p, "name", None) == name)


async def ensure_default_flow(bus: Bus, flow_id: str = DEFAULT_FLOW, params: dict[str, Any] | None = None) -> None:
    """Put the default blueprint and start flow `flow_id` unless it is already running."""
    from processors.base.config_client import config_client

    client = config_client(bus, timeout_s=30)
    try:
        bp = load_blueprint(default_blueprint_path())
        names = (await client.request(FlowRequest(operation="list-blueprints"))).blueprint_names or []
        if bp.name not in names:
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
        await system.start(["config"])
        await ensure_default_flow(system.bus, params=flow_params)
        await system.start([n for n in PROCESSOR_NAMES if n != "config"])
        yield system
    finally:
        await system.stop()
