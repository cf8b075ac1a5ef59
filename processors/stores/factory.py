"""Build the configured store backends once per process."""

from __future__ import annotations

from dataclasses import dataclass

from processors.base.settings import StoreSettings
from processors.stores.protocol import EntityIndex, TripleStore


@dataclass
class Stores:
    """The triple store and entity index a process uses."""

    triples: TripleStore
    entities: EntityIndex

    async def close(self) -> None:
        """Close both stores."""
        await self.triples.close()
        if self.entities is not self.triples:
            await self.entities.close()


def open_stores(settings: StoreSettings) -> Stores:
    """Open the backends named by `settings` (embedded SQLite + local index by default)."""
    entities: EntityIndex
    if settings.vectors_backend == "local":
        from processors.stores.local_index import LocalEntityIndex

        entities = LocalEntityIndex(settings.home / "vectors.db")
    else:
        raise ValueError(f"vectors backend {settings.vectors_backend!r} is not available in this build")
    triples: TripleStore
    if settings.triples_backend == "sqlite":
        from processors.stores.sqlite_triples import SqliteTripleStore

        triples = SqliteTripleStore(settings.home / "graph.db", entities)
    else:
        raise ValueError(f"triples backend {settings.triples_backend!r} is not available in this build")
    return Stores(triples, entities)
