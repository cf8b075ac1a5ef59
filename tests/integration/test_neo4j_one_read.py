"""Issue 38 on the real Neo4j: a question's graphrank reads in few Cypher statements. The
candidates (vector index, full-text index, the collection's BM25 statistics and the concepts the
question names) are ONE statement and give what the step-by-step reads give; a hop is two (its
sources' text and mentions, then the names their text gives, the concepts' links and the cosines
of what they reach); lazy-rag's expansion hop is one. A whole search (the candidates, its hops, the chunks) or a
follow-up round is one read transaction (`read_as_one`) that reads and ranks what its reads
read each on its own. A request is a statement (counted by the store and, independently, at the
driver)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import numpy as np
import pytest

from processors.accounting.usage import StoreUsage, counting
from processors.algorithms.passage_rank import PassageRankParams, question_phrases
from processors.query.documents.search import search_chunks, search_many
from processors.stores.chunk_reads import DirectReads
from processors.stores.documents_protocol import ChunkQuery
from processors.stores.neo4j import passages
from processors.stores.neo4j.documents import Neo4jDocumentStore
from processors.stores.neo4j.schema import Neo4jConnection
from schemas.tenant import Tenant
from tests.conftest import Servers
from tests.integration.doc_store_fixtures import e
from tests.integration.test_passage_reads_contract import corpus
from tests.store_observer import observe_stores

pytestmark = pytest.mark.usefixtures("servers")
QUESTION = "Where did Marie Curie study in the city with the museum?"


def _far_from_other_tests(seed: int) -> list[float]:
    """A random unit vector: no other test's vectors are near it (the vector index is shared)."""
    v = np.random.default_rng(seed).standard_normal(384)
    return (v / np.linalg.norm(v)).tolist()


def _near(v: Sequence[float], seed: int) -> list[float]:
    """A unit vector at a cosine of ~0.86 to `v`."""
    x = np.asarray(v) + 0.6 * np.asarray(_far_from_other_tests(seed))
    return (x / np.linalg.norm(x)).tolist()


@pytest.fixture
async def stored(servers: Servers) -> AsyncIterator[tuple[Neo4jDocumentStore, ChunkQuery]]:
    """The contract corpus, its chunks' vectors near one random question vector, in a fresh tenant."""
    store = Neo4jDocumentStore(Neo4jConnection(servers.neo4j_url))
    tenant = Tenant(f"oneread-{uuid.uuid4().hex[:8]}", "c")
    question = _far_from_other_tests(38)
    records = corpus()
    for n, r in enumerate(records):
        r.vectors = [_near(question, 1000 + 10 * n + i) for i in range(len(r.vectors))]
    try:
        await store.store(tenant, records)
        yield store, ChunkQuery(tenant, question)
    finally:
        await store.delete_collection(tenant)
        await store.close()


def _rounded(found: passages.Candidates) -> list[tuple[str, float, float]]:
    return sorted((p.id, round(p.dense, 5), round(p.lexical, 5)) for p in found.passages)


async def test_the_candidates_are_one_statement_and_the_step_by_step_reads(
    stored: tuple[Neo4jDocumentStore, ChunkQuery], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, q = stored
    phrases, terms = question_phrases(QUESTION), ["museum", "study", "curie"]
    seen = observe_stores(monkeypatch)
    with counting() as usage:
        found = await store.candidates(q, terms, 3, phrases=phrases)
    assert usage == StoreUsage(requests=1, round_trips=1) == StoreUsage(seen.requests, seen.calls)

    async def step_by_step(run: passages.Runner) -> passages.Candidates:
        old = await passages.candidates(run, q.tenant, q.vector, terms, 3, None)
        old.named = await passages.named(run, q.tenant, phrases, q.vector or [])
        return old

    old = await store.conn.read_tx(step_by_step)
    assert _rounded(found) == _rounded(old) and found.searched == old.searched == 7
    assert found.named == old.named and set(found.named) == {"marie curie", "city"}
    assert any(p.lexical > 0 for p in found.passages) and len([p for p in found.passages if p.dense > 0.5]) >= 3


async def test_several_questions_are_one_statement(stored: tuple[Neo4jDocumentStore, ChunkQuery]) -> None:
    store, q = stored
    asked = [(q.vector, ["museum"]), (None, ["prizes", "born"]), (_near(q.vector or [], 5), ["city"])]
    with counting() as usage:
        many = await store.candidates_many(q.tenant, asked, 3)
    assert usage == StoreUsage(requests=1, round_trips=1)
    one = [await store.candidates(ChunkQuery(q.tenant, v), terms, 3) for v, terms in asked]
    assert [_rounded(c) for c in many] == [_rounded(c) for c in one]
    assert "paris:0" in {p.id for p in many[0].passages}  # the museum, by BM25 beside the 3 nearest
    assert many[1].passages and all(p.dense == 0 and p.lexical > 0 for p in many[1].passages)  # no vector


async def test_a_hop_is_two_statements_and_an_expansion_one(stored: tuple[Neo4jDocumentStore, ChunkQuery]) -> None:
    store, q = stored
    with counting() as usage:
        hop = await store.passage_links(q, ["paris:0", "curie:0"], set(), 3, {"paris:0"})
    assert usage == StoreUsage(requests=2, round_trips=1)
    assert sorted(hop.concepts_of["paris:0"]) == [e("city"), e("curie")]  # curie: named by the text
    assert {p.id for p in hop.passages} == {"curie:0", "curie:1", "warsaw:0"}
    with counting() as usage:
        found = await store.links(q, [e("curie")], ["paris:0"], 2)
    assert usage == StoreUsage(requests=1, round_trips=1)
    assert {(m.entity, m.chunk_id) for m in found} >= {(e("city"), "paris:0"), (e("paris"), "paris:0")}
    assert len([m for m in found if m.entity == e("curie")]) == 2  # per_entity


class EachReadAlone(DirectReads):
    """The store with each search read its own round trip (as before `read_as_one`)."""

    def __init__(self, store: Neo4jDocumentStore) -> None:
        self.store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


async def test_a_search_is_one_transaction_and_reads_what_its_reads_alone_read(
    stored: tuple[Neo4jDocumentStore, ChunkQuery],
) -> None:
    store, q = stored
    params = PassageRankParams(candidates=3, seeds=3)
    alone: Any = EachReadAlone(store)
    with counting() as apart:
        before = await search_chunks(alone, q, QUESTION, "graph", 5, params)
    with counting() as together:
        after = await search_chunks(store, q, QUESTION, "graph", 5, params)
    assert together.round_trips == 1 and apart.round_trips >= 3, (apart, together)  # candidates, a hop, chunks
    assert together.requests == apart.requests  # the same statements, in one transaction
    assert [(c.id, c.score) for c in after] == [(c.id, c.score) for c in before] and len(after) >= 3
    asked = [(q.vector, "museum city"), (_near(q.vector or [], 5), "prizes born")]
    with counting() as apart:
        before_many = await search_many(alone, q.tenant, asked, "fused", 3, params)
    with counting() as together:
        after_many = await search_many(store, q.tenant, asked, "fused", 3, params)
    assert (apart.round_trips, together.round_trips) == (2, 1)  # the candidates, then the chunks
    assert [[(c.id, c.score) for c in cs] for cs in after_many] == [[(c.id, c.score) for c in cs] for cs in before_many]
    assert all(after_many)
