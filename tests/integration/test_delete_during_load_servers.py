"""A delete is final on the real stack: every processor talks over the real Pulsar and Neo4j holds
the documents, chunks, triples and entity vectors; the scenario of
tests/documents/delete_during_load.py, with what is left counted as the tenant's Neo4j nodes."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from processors.base.runtime import make_bus
from processors.base.settings import RuntimeSettings
from processors.commands.system import System, embedded
from processors.stores.neo4j.schema import Neo4jConnection
from processors.stores.settings import StoreSettings
from tests.conftest import Servers
from tests.documents.delete_during_load import Leftovers, check_delete_during_load, check_document_delete_during_load

# Every node of a tenant but its deletion marks (which a delete itself writes) and the record of its
# last load (checked apart: at most a finished one), by label.
TENANT_NODES = (
    "MATCH (n) WHERE n.user = $user AND n.collection = $collection AND NOT n:KgDeletion AND NOT n:KgLoad "
    "RETURN labels(n)[0] AS label, count(*) AS n"
)


@pytest.fixture
async def system(servers: Servers, tmp_path: Path) -> AsyncIterator[System]:
    rt = RuntimeSettings(bus="pulsar", pulsar_url=servers.pulsar_url, request_timeout_s=300)
    store = StoreSettings(home=tmp_path / "home", triples_backend="neo4j", vectors_backend="neo4j",
                          documents_backend="neo4j", neo4j_url=servers.neo4j_url)  # fmt: skip
    async with embedded(store, rt, bus=make_bus(rt)) as s:
        yield s


@pytest.fixture
async def leftovers(servers: Servers) -> AsyncIterator[Leftovers]:
    conn = Neo4jConnection(servers.neo4j_url).acquire()

    async def count(user: str, collection: str) -> dict[str, int]:
        rows = await conn.read(TENANT_NODES, {"user": user, "collection": collection})
        return {r["label"]: int(r["n"]) for r in rows}

    try:
        yield count
    finally:
        await conn.release()


async def test_a_collection_deleted_during_a_load_stays_deleted(system: System, leftovers: Leftovers) -> None:
    await check_delete_during_load(system, f"del-{uuid.uuid4().hex[:8]}", leftovers)


async def test_documents_deleted_during_a_load_stay_deleted(system: System) -> None:
    await check_document_delete_during_load(system, f"del-{uuid.uuid4().hex[:8]}")
