"""Build the configured store backends once per process."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from processors.stores.documents_protocol import CommunityStore, DocumentStore
from processors.stores.protocol import EntityIndex, TripleStore
from processors.stores.settings import StoreSettings


@dataclass
class Stores:
    """The triple store, entity index and document store a process uses."""

    triples: TripleStore
    entities: EntityIndex
    documents: DocumentStore
    communities: CommunityStore

    async def close(self) -> None:
        """Close every store."""
        await self.triples.close()
        await self.entities.close()
        await self.communities.close()
        await self.documents.close()


class _Connections:
    """One Cassandra session / Neo4j driver per process, shared by the triple store and the index."""

    def __init__(self, settings: StoreSettings) -> None:
        self.settings = settings
        self._cassandra: Any = None
        self._neo4j: Any = None

    def cassandra(self) -> Any:
        """The shared Cassandra connection (connects lazily on first query)."""
        if self._cassandra is None:
            from processors.stores.cassandra.schema import CassandraConnection

            s = self.settings
            self._cassandra = CassandraConnection(s.cassandra_hosts, s.cassandra_port, s.cassandra_keyspace)
        return self._cassandra

    def neo4j(self) -> Any:
        """The shared Neo4j driver holder (opens lazily in the event loop of the first query)."""
        if self._neo4j is None:
            from processors.stores.neo4j.schema import Neo4jConnection

            s = self.settings
            self._neo4j = Neo4jConnection(s.neo4j_url, s.neo4j_user, s.neo4j_password)
        return self._neo4j


def open_stores(settings: StoreSettings) -> Stores:
    """Open the backends named by `settings` (embedded SQLite + local index by default)."""
    entities: EntityIndex
    conns = _Connections(settings)
    if settings.vectors_backend == "local":
        from processors.stores.local.entity_index import LocalEntityIndex

        entities = LocalEntityIndex(settings.home / "vectors.db")
    elif settings.vectors_backend == "cassandra":
        from processors.stores.cassandra.entities import CassandraEntityIndex

        entities = CassandraEntityIndex(conns.cassandra())
    elif settings.vectors_backend == "neo4j":
        from processors.stores.neo4j.store import Neo4jEntityIndex

        entities = Neo4jEntityIndex(conns.neo4j())
    else:
        raise ValueError(f"vectors backend {settings.vectors_backend!r} is not available in this build")
    triples: TripleStore
    if settings.triples_backend == "sqlite":
        from processors.stores.sqlite.triples import SqliteTripleStore

        triples = SqliteTripleStore(settings.home / "graph.db", entities)
    elif settings.triples_backend == "cassandra":
        from processors.stores.cassandra.triples import CassandraTripleStore

        triples = CassandraTripleStore(conns.cassandra(), entities)
    elif settings.triples_backend == "neo4j":
        from processors.stores.neo4j.store import Neo4jTripleStore

        triples = Neo4jTripleStore(conns.neo4j(), entities)
    else:
        raise ValueError(f"triples backend {settings.triples_backend!r} is not available in this build")
    documents: DocumentStore
    communities: CommunityStore
    if settings.documents_backend == "neo4j":
        from processors.stores.neo4j.documents import Neo4jCommunityStore, Neo4jDocumentStore

        holds = settings.vectors_backend == settings.triples_backend == "neo4j"
        documents, communities = Neo4jDocumentStore(conns.neo4j(), holds), Neo4jCommunityStore(conns.neo4j())
    else:
        from processors.stores.sqlite.communities import SqliteCommunityStore
        from processors.stores.sqlite.documents import SqliteDocumentStore

        sqlite_docs = SqliteDocumentStore(settings.home / "docs.db")
        documents, communities = sqlite_docs, SqliteCommunityStore(sqlite_docs.db, sqlite_docs.lists)
    return Stores(triples, entities, documents, communities)
