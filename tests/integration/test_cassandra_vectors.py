"""Cassandra vectors are read back from `vec_raw` bytes; a keyspace created before that column
existed is migrated on connect, and the vectors it already holds are still read (from `vec`)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from processors.stores.cassandra.entities import CassandraEntityIndex
from processors.stores.cassandra.schema import CassandraConnection, cql_identifier
from processors.stores.protocol import VECTOR_DIMENSIONS
from schemas.tenant import Tenant

pytestmark = pytest.mark.usefixtures("servers")

OLD_VECTORS_TABLE = (
    "CREATE TABLE entity_vectors (user text, collection text, kind text, iri text, label text,"
    f" vec vector<float, {VECTOR_DIMENSIONS}>, PRIMARY KEY ((user, collection, kind), iri))"
)


@pytest.fixture
def old_keyspace(servers: Any) -> Iterator[tuple[Any, str]]:
    """A keyspace whose entity_vectors table has no vec_raw column, as an earlier release made it."""
    from cassandra.cluster import Cluster

    keyspace = cql_identifier(f"kgflow_old_{uuid.uuid4().hex[:12]}")
    cluster = Cluster([servers.cassandra_host], port=servers.cassandra_port, protocol_version=5)
    session = cluster.connect()
    try:
        session.execute(
            "CREATE KEYSPACE " + keyspace + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
        )
        session.set_keyspace(keyspace)
        session.execute(OLD_VECTORS_TABLE, timeout=120)
        yield session, keyspace
    finally:
        session.execute("DROP KEYSPACE IF EXISTS " + keyspace, timeout=120)
        cluster.shutdown()


def _vec(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(VECTOR_DIMENSIONS).astype(np.float32)


async def test_old_vectors_are_migrated_and_read(old_keyspace: tuple[Any, str], servers: Any) -> None:
    session, keyspace = old_keyspace
    old = _vec(1)
    session.execute(
        "INSERT INTO entity_vectors (user, collection, kind, iri, label, vec) VALUES (%s, %s, %s, %s, %s, %s)",
        ("u", "c", "entity", "http://x/old", "old one", old.tolist()),
    )
    conn = CassandraConnection(servers.cassandra_host, servers.cassandra_port, keyspace)
    index = CassandraEntityIndex(conn)
    try:
        new = _vec(2)
        await index.upsert(Tenant("u", "c"), [("http://x/new", "new one", new)], model="unit-test")
        columns = {r.column_name for r in session.execute(
            "SELECT column_name FROM system_schema.columns WHERE keyspace_name = %s AND table_name = 'entity_vectors'",
            (keyspace,),
        )}  # fmt: skip
        assert "vec_raw" in columns
        got = await index.vectors(Tenant("u", "c"), ["http://x/old", "http://x/new", "http://x/none"])
        assert set(got) == {"http://x/old", "http://x/new"}
        np.testing.assert_array_equal(np.asarray(got["http://x/old"], dtype=np.float32), old)
        np.testing.assert_array_equal(np.asarray(got["http://x/new"], dtype=np.float32), new)
        hits = await index.search(Tenant("u", "c"), old.tolist(), None, 2)  # ANN rows: one legacy, one raw
        assert [h.iri for h in hits] == ["http://x/old", "http://x/new"]
        assert hits[0].score == pytest.approx(1.0, abs=1e-5)
        sims = await index.similarities(Tenant("u", "c"), new.tolist(), ["http://x/old", "http://x/new"])
        assert sims["http://x/new"] == pytest.approx(1.0, abs=1e-5)
        assert sims["http://x/old"] == pytest.approx(
            float(old @ new / np.linalg.norm(old) / np.linalg.norm(new)), abs=1e-5
        )
    finally:
        await index.close()
