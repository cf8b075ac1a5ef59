"""lazy-rag's scenario (tests/documents/lazy_rag_scenario.py) on the real stack: every processor
talks over the real Pulsar, and Neo4j holds the documents, chunks, triples and entity vectors."""

from __future__ import annotations

import uuid
from pathlib import Path

from processors.base.runtime import make_bus
from processors.base.settings import RuntimeSettings
from processors.commands.system import embedded
from processors.stores.settings import StoreSettings
from tests.conftest import Servers
from tests.documents.lazy_rag_scenario import check_lazy_rag


async def test_lazy_rag_keeps_its_promises_over_pulsar_and_neo4j(servers: Servers, tmp_path: Path) -> None:
    rt = RuntimeSettings(bus="pulsar", pulsar_url=servers.pulsar_url, request_timeout_s=300)
    store = StoreSettings(home=tmp_path / "home", triples_backend="neo4j", vectors_backend="neo4j",
                          documents_backend="neo4j", neo4j_url=servers.neo4j_url)  # fmt: skip
    async with embedded(store, rt, bus=make_bus(rt)) as system:
        await check_lazy_rag(system, f"lazy-{uuid.uuid4().hex[:8]}")
