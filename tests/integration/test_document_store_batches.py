"""Issue 38: a batch of documents is written at the store's speed — its cost in store requests,
round trips and (Neo4j) Cypher statements does not grow with the batch's size, on SQLite and on
the real Neo4j. Batches of 1, 10 and 100 documents with chunks, vectors, mentions and relations;
a first store and a replace of the same ids (which also reads and unlinks the old versions).
Measured: Neo4j 1 transaction of 7 Cypher statements to store, 11 to replace, for 1, 10 or 100
documents (already so before issue 38); SQLite one pool write of 37 statement batches to store and
43 to replace (before: 38 and 47 for 1 document, 236 and 300 for 10: a statement per chunk)."""

from __future__ import annotations

from typing import Any

import pytest

from processors.accounting.usage import StoreUsage, counting
from processors.stores.documents_protocol import DocumentRecord
from schemas.tenant import Tenant
from tests.integration.doc_store_fixtures import DocBackend, record
from tests.integration.store_fixtures import unit
from tests.store_observer import observe_stores

SIZES = (1, 10, 100)


def batch(n: int, version: int) -> list[DocumentRecord]:
    """`n` documents of three chunks each, mentioning shared and own entities, relating them."""
    return [
        record(
            f"d{i}",
            [f"river {i} bridge v{version}", f"museum curie {i}", f"paris album {i % 7}"],
            [unit(10 * i + k) for k in range(3)],
            mentions=[(0, f"own{i}", 1), (1, "curie", 2), (2, "paris", 1), (2, f"g{i % 7}", 1)],
            relations=[("curie", "paris", [1, 2]), (f"own{i}", "curie", [0, 1])],
            owned=[f"own{i}"],
        )
        for i in range(n)
    ]


def count_statements(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count every Cypher statement a managed transaction runs (one cell, mutated)."""
    from neo4j import AsyncManagedTransaction

    seen, original = [0], AsyncManagedTransaction.run

    async def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen[0] += 1
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(AsyncManagedTransaction, "run", run)
    return seen


async def test_a_batch_write_costs_the_same_whatever_its_size(
    docs: DocBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    await docs.documents.store(Tenant(*docs.scope()), batch(1, 0))  # connected, schema and migration done
    observed, statements = observe_stores(monkeypatch), count_statements(monkeypatch)
    costs: dict[tuple[str, int], tuple[StoreUsage, int]] = {}
    for n in SIZES:
        tenant = Tenant(*docs.scope())
        for step, version in (("store", 1), ("replace", 2)):
            before_requests, before_statements = observed.requests, statements[0]
            with counting() as usage:
                await docs.documents.store(tenant, batch(n, version))
            if docs.name == "neo4j":  # (SQLite's engine traces an executemany row by row)
                assert usage.requests == observed.requests - before_requests  # what reached the store
            costs[step, n] = (usage, statements[0] - before_statements)
        assert (await docs.documents.counts(tenant.user))[tenant.collection].chunks == 3 * n  # all written
    for step in ("store", "replace"):
        first = costs[step, SIZES[0]]
        # one write (SQLite: one pool write; Neo4j: one transaction) of the same statements for 1 or
        # 100 documents (SQLite: its statement batches; Neo4j: the Cypher queries in the transaction)
        assert [costs[step, n] for n in SIZES] == [first] * len(SIZES), costs
        assert first[0].round_trips == 1
        if docs.name == "neo4j":
            assert first[0].requests == first[1] <= 12  # a request is a Cypher statement
