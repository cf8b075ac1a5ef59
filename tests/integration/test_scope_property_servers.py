"""The scope property of every retrieval service (tests/documents/scope_property.py) on the real
servers: every store on Neo4j, and triples + entity vectors on Cassandra (documents on SQLite,
as Cassandra has no document store). Each run is a user of its own, deleted at the end."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from processors.base.settings import RuntimeSettings
from processors.commands.system import embedded
from processors.stores.settings import StoreSettings
from schemas.documents import DeleteCollection
from schemas.services import DOCUMENT_STORE
from tests.conftest import Servers
from tests.documents.scope_property import QUESTIONS, C, check_scopes, client, scopes_count


def _settings(backend: str, servers: Servers, cassandra_conn: Any, home: Path) -> StoreSettings:
    if backend == "neo4j":
        return StoreSettings(home=home, documents_backend="neo4j", vectors_backend="neo4j", triples_backend="neo4j",
                             neo4j_url=servers.neo4j_url)  # fmt: skip
    return StoreSettings(home=home, triples_backend="cassandra", vectors_backend="cassandra",
                         cassandra_hosts=servers.cassandra_host, cassandra_port=servers.cassandra_port,
                         cassandra_keyspace=cassandra_conn.keyspace)  # fmt: skip


@pytest.mark.parametrize("backend", ["neo4j", "cassandra"])
async def test_no_service_leaks_a_scope_on_the_servers(
    backend: str, servers: Servers, cassandra_conn: Any, tmp_path: Path
) -> None:
    user = f"prop-{uuid.uuid4().hex[:8]}"
    settings = _settings(backend, servers, cassandra_conn, tmp_path / "home")
    async with embedded(settings, RuntimeSettings(request_timeout_s=300)) as system:
        try:
            assert await check_scopes(system, user) == scopes_count() * len(QUESTIONS)
        finally:
            for collection in [C, *(f"fresh-{n}" for n in range(scopes_count()))]:
                await client(system, DOCUMENT_STORE).request(DeleteCollection(user=user, collection=collection))
