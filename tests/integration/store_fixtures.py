"""Fixtures and factories for the store contract and injection suites: the three backends
(SQLite + local index, Cassandra, Neo4j) behind one `StoreBackend` handle.

Cassandra uses one keyspace per test session (`kgflow_test_<random>`, dropped at the end);
Neo4j shares its database, so every test writes under unique user/collection names and the
handle deletes what it wrote afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from processors.stores.protocol import EntityIndex, TripleStore
from schemas.tenant import Tenant
from schemas.terms import RDFS_LABEL, Term, Triple
from schemas.triples import NeighboursQuery

BACKENDS = ("sqlite", "cassandra", "neo4j")
DIM = 384
# How far the embedded index's cosines may be from float32's: it keeps int8 codes (about 1e-3 at 384
# dimensions); the servers keep float32.
INT8_COSINE_TOL = 2e-3


def unit(seed: int, dim: int = DIM) -> list[float]:
    """A deterministic random unit vector (float32 values)."""
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return [float(x) for x in (v / np.linalg.norm(v)).astype(np.float32)]


def near(base: list[float], seed: int, noise: float) -> list[float]:
    """A unit vector close to `base` (cosine falls as `noise` grows)."""
    v = np.asarray(base, dtype=np.float32) + noise * np.asarray(unit(seed), dtype=np.float32)
    return [float(x) for x in (v / np.linalg.norm(v)).astype(np.float32)]


def iri(name: str) -> Term:
    """An IRI term."""
    return Term.iri(name)


def nq(
    user: str,
    collection: str,
    entities: list[str],
    limit_per_entity: int,
    direction: str = "both",
    query_vector: list[float] | None = None,
    max_returned: int | None = None,
    **rest: Any,
) -> NeighboursQuery:
    """A neighbour query, positional as the contract tests read best."""
    return NeighboursQuery(
        user=user,
        collection=collection,
        entities=entities,
        limit_per_entity=limit_per_entity,
        direction=direction,  # type: ignore[arg-type]
        query_vector=query_vector,
        max_returned=max_returned,
        **rest,
    )


def t(s: str, p: str, o: Term | str) -> Triple:
    """A triple; a str object is an IRI."""
    return Triple(s=Term.iri(s), p=Term.iri(p), o=o if isinstance(o, Term) else Term.iri(o))


def new_tenant(handed_out: list[tuple[str, str]], user: str | None, collection: str | None) -> tuple[str, str]:
    """A (user, collection) pair no other test uses (or the given names), added to `handed_out`."""
    tag = uuid.uuid4().hex[:10]
    pair = (user if user is not None else f"u-{tag}", collection if collection is not None else f"c-{tag}")
    handed_out.append(pair)
    return pair


@dataclass
class StoreBackend:
    """One backend's triple store and entity index, plus tenant names for a test."""

    name: str
    triples: TripleStore
    index: EntityIndex
    scopes: list[tuple[str, str]] = field(default_factory=list)

    @property
    def cosine_tol(self) -> float:
        """How far this backend's cosines may be from float32's (INT8_COSINE_TOL on SQLite)."""
        return INT8_COSINE_TOL if self.name == "sqlite" else 1e-5

    def scope(self, user: str | None = None, collection: str | None = None) -> tuple[str, str]:
        """A (user, collection) pair no other test uses (or the given names); deleted at teardown."""
        return new_tenant(self.scopes, user, collection)

    async def cleanup(self) -> None:
        """Delete everything written under the scopes handed out."""
        for user, collection in self.scopes:
            await self.triples.delete_collection(Tenant(user, collection))
            await self.index.delete_collection(Tenant(user, collection))


@pytest.fixture(scope="session")
def cassandra_conn(servers: Any) -> Iterator[Any]:
    """A Cassandra connection to a keyspace of this session only (dropped at the end)."""
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import DCAwareRoundRobinPolicy

    from processors.stores.cassandra.schema import CassandraConnection, cql_identifier

    keyspace = cql_identifier(f"kgflow_test_{uuid.uuid4().hex[:12]}")
    conn = CassandraConnection(servers.cassandra_host, servers.cassandra_port, keyspace).acquire()
    conn.connect()
    yield conn
    # released before the servers fixture stops Cassandra: a cluster left open reconnects and logs
    asyncio.run(conn.release())
    profile = ExecutionProfile(load_balancing_policy=DCAwareRoundRobinPolicy())
    cluster = Cluster(
        [servers.cassandra_host],
        port=servers.cassandra_port,
        protocol_version=5,
        execution_profiles={EXEC_PROFILE_DEFAULT: profile},
    )
    try:
        cluster.connect().execute("DROP KEYSPACE IF EXISTS " + keyspace, timeout=120)
    finally:
        cluster.shutdown()


async def open_backend(name: str, tmp_path: Path, request: pytest.FixtureRequest) -> StoreBackend:
    """Build the stores of backend `name` (servers come from the session fixtures)."""
    if name == "sqlite":
        from processors.stores.local.entity_index import LocalEntityIndex
        from processors.stores.sqlite.triples import SqliteTripleStore

        local = LocalEntityIndex(tmp_path / "vectors.db")
        return StoreBackend(name, SqliteTripleStore(tmp_path / "graph.db", local), local)
    if name == "cassandra":
        from processors.stores.cassandra.entities import CassandraEntityIndex
        from processors.stores.cassandra.triples import CassandraTripleStore

        conn = request.getfixturevalue("cassandra_conn")
        cidx = CassandraEntityIndex(conn)
        return StoreBackend(name, CassandraTripleStore(conn, cidx), cidx)
    from processors.stores.neo4j.schema import Neo4jConnection
    from processors.stores.neo4j.store import Neo4jEntityIndex, Neo4jTripleStore

    servers = request.getfixturevalue("servers")
    neo = Neo4jConnection(servers.neo4j_url)
    nidx = Neo4jEntityIndex(neo)
    return StoreBackend(name, Neo4jTripleStore(neo, nidx), nidx)


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreBackend]:
    """Each backend in turn (the contract is the same for all three)."""
    backend = await open_backend(request.param, tmp_path, request)
    async with cleaned_up(backend, backend.triples, backend.index):
        yield backend


@contextlib.asynccontextmanager
async def cleaned_up(backend: Any, *stores: Any) -> AsyncIterator[None]:
    """Run the block; then delete what `backend` handed out (its `cleanup`) and close `stores`."""
    try:
        yield
    finally:
        try:
            await backend.cleanup()
        finally:
            for store in stores:
                await store.close()


XSD_INT = "http://www.w3.org/2001/XMLSchema#integer"


# A small graph the contract suites share: IRI edges, labels, typed and tagged literals.
GRAPH = [
    t("a", "p1", "b"),
    t("a", "p1", "c"),
    t("a", "p2", "c"),
    t("b", "p2", "c"),
    t("c", "p3", "a"),
    t("d", "p1", "a"),
    t("a", RDFS_LABEL, Term.literal("Alpha")),
    t("b", RDFS_LABEL, Term.literal("Bee")),
    t("a", "age", Term.literal("42", XSD_INT)),
    t("a", "name", Term.literal("Alpha", language="en")),
    t("a", "name", Term.literal("Alpha")),
    t("a", "ref", Term.literal("b")),  # a literal whose text equals an IRI
]


def count_store_calls(store: StoreBackend, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The store's queries from now on, one entry per call to its connection (a logical round trip)."""
    target: Any = store.triples.db if store.name == "sqlite" else store.triples.conn  # type: ignore[attr-defined]
    methods = {"sqlite": ("read",), "cassandra": ("run", "run_many"), "neo4j": ("read",)}[store.name]
    calls: list[str] = []
    for name in methods:
        original = getattr(target, name)

        async def counted(*args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
            calls.append(_name)
            return await _original(*args, **kwargs)

        monkeypatch.setattr(target, name, counted)
    return calls
