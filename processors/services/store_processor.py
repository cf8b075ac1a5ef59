"""StoreProcessor: a flow processor served from the process's stores (the readers in `query/`, the
writers in `ingest/`). The framework (`base`) knows no stores; this is where the two meet."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from processors.base.bus import Bus
from processors.base.processor import FlowProcessor
from processors.base.registry import Host
from processors.base.settings import RuntimeSettings
from processors.stores.factory import Stores
from schemas.flows import GraphChanged
from schemas.topics import GRAPH_CHANGED


@runtime_checkable
class StoreHost(Protocol):
    """A host that also holds the process's stores (the running system opens them on first use)."""

    @property
    def stores(self) -> Stores:
        """The process's stores."""
        ...


class StoreProcessor(FlowProcessor):
    """A processor served from the process's stores."""

    def __init__(self, bus: Bus, runtime: RuntimeSettings, stores: Stores) -> None:
        super().__init__(bus, runtime)
        self.stores = stores

    @classmethod
    def create(cls, host: Host) -> StoreProcessor:
        """Served from the host's stores (opened here, on first use)."""
        if not isinstance(host, StoreHost):
            raise TypeError(f"{cls.name} is served from stores; its host has none")
        return cls(host.bus, host.runtime, host.stores)

    async def announce_graph_changed(self, user: str, collection: str) -> None:
        """Tell whoever follows GRAPH_CHANGED (label caches) that the collection's graph changed."""
        note = GraphChanged(user=user, collection=collection)
        await (await self._producer(GRAPH_CHANGED)).send(note.model_dump_json().encode(), {})
