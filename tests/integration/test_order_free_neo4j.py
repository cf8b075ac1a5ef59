"""Order-free entity resolution with every store on the real Neo4j: the scenario of
tests/documents/test_order_free.py (in order, reversed, four concurrent writers, a delete;
the label a concept's most frequent spelling)."""

from __future__ import annotations

from pathlib import Path

from processors.stores.settings import StoreSettings
from tests.conftest import Servers
from tests.documents.test_order_free import same_graph_whatever_the_order


async def test_one_corpus_gives_one_graph_whatever_the_order_on_neo4j(servers: Servers, tmp_path: Path) -> None:
    settings = StoreSettings(home=tmp_path / "home", documents_backend="neo4j", vectors_backend="neo4j",
                             triples_backend="neo4j", neo4j_url=servers.neo4j_url)  # fmt: skip
    await same_graph_whatever_the_order(settings)
