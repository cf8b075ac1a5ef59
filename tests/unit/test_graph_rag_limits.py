"""Issue 4 limits: edge scoring order, frontier caps, label-cache invalidation on load, timeouts."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from processors.accounting.usage import StoreUsage, counting
from processors.algorithms.edges import NeighbourResult, edge_scores
from processors.algorithms.vectors import cosines
from processors.base.bus import MemoryBus
from processors.base.client import RemoteError, RequestResponseClient
from processors.base.runtime import ensure_default_flow
from processors.base.settings import RuntimeSettings
from processors.commands.system import System, embedded
from processors.ingest.triples.loader import load_triples
from processors.models.embeddings.model import OnnxMiniLM
from processors.retrieval.graph_rag.rag import GraphRag, GraphRagSettings
from processors.retrieval.graph_rag.sources import LabelBatch, Seeds
from processors.stores.local.entity_index import LocalEntityIndex
from processors.stores.settings import StoreSettings
from processors.stores.sqlite.triples import SqliteTripleStore
from schemas.flows import GraphChanged
from schemas.graph_rag import GraphRagRequest, SeedEntity
from schemas.labels import LabelRequest
from schemas.services import GRAPH_RAG, LABEL_RESOLVER, Service
from schemas.tenant import Tenant
from schemas.terms import RDFS_LABEL, Term, Triple
from schemas.topics import GRAPH_CHANGED
from schemas.triples import NeighboursQuery

E = "http://x/e/"
U, C = "u", "c"
DIM = 8


def _unit(*parts: tuple[int, float]) -> list[float]:
    v = np.zeros(DIM, dtype=np.float32)
    for i, x in parts:
        v[i] = x
    return (v / np.linalg.norm(v)).tolist()


def _edge(s: str, p: str, o: str) -> Triple:
    return Triple(s=Term.iri(E + s), p=Term.iri(E + p), o=Term.iri(E + o))


@pytest.fixture
async def scored_store(tmp_path: Path) -> AsyncIterator[SqliteTripleStore]:
    """A hub with 6 edges (predicates p0..p5 to x0..x5) and hand-made label vectors."""
    index = LocalEntityIndex(tmp_path / "v.db")
    store = SqliteTripleStore(tmp_path / "g.db", index)
    await store.add_triples(Tenant(U, C), [_edge("hub", f"p{i}", f"x{i}") for i in range(6)])
    # the question points along axis 0; predicate p_i has weight (6-i)/6 on it, x_i a scrambled one
    weights = [0.1, 0.9, 0.5, 0.3, 0.7, 0.2]
    items = [(E + f"x{i}", f"x{i}", _unit((0, weights[i]), (1, 1.0))) for i in range(6)]
    items.append((E + "hub", "hub", _unit((2, 1.0))))
    await index.upsert(Tenant(U, C), items, "entity", model="unit-test")
    preds = [(E + f"p{i}", f"p{i}", _unit((0, (6 - i) / 6), (3, 1.0))) for i in range(6)]
    await index.upsert(Tenant(U, C), preds, "predicate", model="unit-test")
    yield store
    await store.close()
    await index.close()


async def test_scored_neighbours_come_best_first_by_edge_scoring(scored_store: SqliteTripleStore) -> None:
    q = _unit((0, 1.0))
    query = NeighboursQuery(user=U, collection=C, entities=[E + "hub"], limit_per_entity=100)
    res = await scored_store.neighbours(query.model_copy(update={"query_vector": q, "max_returned": 4}))
    assert len(res.triples) == 4 and res.rows_read == 6
    vecs = await scored_store.entity_index.vectors(
        Tenant(U, C), [E + f"p{i}" for i in range(6)] + [E + f"x{i}" for i in range(6)]
    )  # type: ignore[union-attr]
    pairs = [(E + f"p{i}", E + f"x{i}") for i in range(6)]
    expected = edge_scores(*zip(*pairs, strict=True), cosines(q, [x for pair in pairs for x in pair], vecs)).tolist()
    best4 = sorted(range(6), key=lambda i: -expected[i])[:4]
    assert [t.p.value for t in res.triples] == [E + f"p{i}" for i in best4]
    assert res.scores == pytest.approx([expected[i] for i in best4])
    assert all(a >= b for a, b in zip(res.scores, res.scores[1:], strict=False))  # type: ignore[operator]
    unscored = await scored_store.neighbours(query)
    assert len(unscored.triples) == 6 and unscored.scores == [None] * 6


class StoreSources:
    """GraphSources over a real SQLite store; records every neighbours call (no bus, no model)."""

    def __init__(self, store: SqliteTripleStore, seeds: list[str]) -> None:
        self.store = store
        self.seeds = seeds
        self.calls: list[tuple[list[str], int, int]] = []

    async def embed(self, text: str) -> list[float]:
        return _unit((0, 1.0))

    async def entities(self, scope: Tenant, vector: list[float], text: str, limit: int, predicates: int) -> Seeds:
        return Seeds([SeedEntity(id=s, score=1.0, lexical=True) for s in self.seeds[:limit]], [])

    async def neighbours(self, query: NeighboursQuery) -> NeighbourResult:
        res = await self.store.neighbours(query)
        self.calls.append((list(query.entities), query.limit_per_entity, res.rows_read))
        return res

    async def labels(self, scope: Tenant, iris: Sequence[str]) -> LabelBatch:
        return LabelBatch(await self.store.labels(scope, iris))

    def complete(self, system: str, prompt: str, streaming: bool):  # type: ignore[no-untyped-def]
        raise AssertionError("no LLM in these tests")


@pytest.mark.parametrize("traversal", ["relevance", "bfs"])
async def test_frontier_caps_bound_entities_per_round_trip_and_rows_read(tmp_path: Path, traversal: str) -> None:
    store = SqliteTripleStore(tmp_path / "g.db")
    # 12 seeds, each with 20 edges to its own leaves, each leaf with 3 further edges
    edges = [_edge(f"s{i}", "r", f"l{i}_{j}") for i in range(12) for j in range(20)]
    edges += [_edge(f"l{i}_{j}", "q", f"m{i}_{j}_{k}") for i in range(12) for j in range(20) for k in range(3)]
    await store.add_triples(Tenant(U, C), edges)
    sources = StoreSources(store, [E + f"s{i}" for i in range(12)])
    settings = GraphRagSettings(
        max_frontier=5,
        candidates_per_entity=4,
        triple_limit=4,
        max_subgraph_size=10_000,
        edge_limit=10_000,
        max_path_length=2,
        traversal=traversal,  # type: ignore[arg-type]
    )
    found = await GraphRag(sources, settings).retrieve(GraphRagRequest(query="q", user=U, collection=C, no_llm=True))
    assert len(sources.calls) == 2
    for entities, per_entity, rows in sources.calls:
        assert 0 < len(entities) <= 5  # max_frontier
        assert per_entity == 4  # candidates_per_entity (relevance) / triple_limit (bfs)
        assert rows <= len(entities) * 4 * 2  # both directions, capped per entity
    assert found.stats.rows_read == sum(c[2] for c in sources.calls)
    assert len(found.triples) <= 5 * 4 * 2 * 2
    await store.close()


async def _client(system, service: Service):  # type: ignore[no-untyped-def]
    return RequestResponseClient.for_service(system.bus, service, "default", 30)


def _labelled(iri: str, label: str) -> list[Triple]:
    return [
        Triple(s=Term.iri(E + iri), p=Term.iri(RDFS_LABEL), o=Term.literal(label)),
        Triple(s=Term.iri(E + iri), p=Term.iri(E + "near"), o=Term.iri(E + "z")),
    ]


async def test_loading_a_collection_invalidates_its_cached_labels(tmp_path: Path) -> None:
    async with embedded(StoreSettings(home=tmp_path / "home"), RuntimeSettings()) as system:
        labels = await _client(system, LABEL_RESOLVER)
        try:
            emb = OnnxMiniLM.shared()
            await load_triples(system.stores, emb, Tenant(U, C), _labelled("a", "Old name"))
            await load_triples(system.stores, emb, Tenant(U, "other"), _labelled("a", "Other old"))
            ask = LabelRequest(user=U, collection=C, iris=[E + "a"])
            first = await labels.request(ask)
            assert first.labels == {E + "a": "Old name"} and first.cache_misses == 1
            other = await labels.request(LabelRequest(user=U, collection="other", iris=[E + "a"]))
            assert other.labels == {E + "a": "Other old"}
            with counting() as usage:  # what the resolver reports back with its answer
                again = await labels.request(ask)
            assert again.cache_hits == 1 and usage == StoreUsage(0, 0)  # a hit reads nothing

            # a new load renames `a` in both collections, then announces only collection C
            await load_triples(system.stores, emb, Tenant(U, C), _labelled("a", "New name"))
            await load_triples(system.stores, emb, Tenant(U, "other"), _labelled("a", "Other new"))
            prod = await system.bus.producer(GRAPH_CHANGED)
            await prod.send(GraphChanged(user=U, collection=C).model_dump_json().encode(), {})
            for _ in range(100):  # the resolver applies the notice asynchronously
                fresh = await labels.request(ask)
                if fresh.labels[E + "a"] == "New name":
                    break
            assert fresh.labels == {E + "a": "New name"} and fresh.cache_misses == 1
            stale = await labels.request(LabelRequest(user=U, collection="other", iris=[E + "a"]))
            assert stale.labels == {E + "a": "Other old"} and stale.cache_hits == 1  # other collection untouched
        finally:
            await labels.stop()


async def test_label_misses_are_one_store_read_with_no_triples_service(tmp_path: Path) -> None:
    """The resolver reads the store itself: no bus request to `triples` (none runs here)."""
    system = System(MemoryBus(), StoreSettings(home=tmp_path / "home"), RuntimeSettings())
    try:
        await system.start(["config"])
        await ensure_default_flow(system.bus)
        await system.start([LABEL_RESOLVER.name])
        await load_triples(system.stores, OnnxMiniLM.shared(), Tenant(U, C), _labelled("a", "Ada"))
        labels = RequestResponseClient.for_service(system.bus, LABEL_RESOLVER, "default", 5)
        try:
            with counting() as usage:
                res = await labels.request(LabelRequest(user=U, collection=C, iris=[E + "a", E + "z"]))
        finally:
            await labels.stop()
        assert res.error is None and res.labels == {E + "a": "Ada"}
        assert res.cache_misses == 2 and usage == StoreUsage(requests=1, round_trips=1)  # one SELECT for both
    finally:
        await system.stop()


async def test_tiny_timeout_is_a_timeout_error_and_the_processor_keeps_serving(tmp_path: Path) -> None:
    async with embedded(StoreSettings(home=tmp_path / "home"), RuntimeSettings()) as system:
        await load_triples(system.stores, OnnxMiniLM.shared(), Tenant(U, C), _labelled("marie", "Marie Curie"))
        rag = await _client(system, GRAPH_RAG)
        try:
            req = GraphRagRequest(query="Who is Marie Curie?", user=U, collection=C, no_llm=True)
            with pytest.raises(RemoteError) as err:
                await rag.request(req.model_copy(update={"timeout_s": 1e-6}))
            assert err.value.type == "timeout"
            ok = await rag.request(req)
            assert ok.error is None and any(t.s == "Marie Curie" for t in ok.triples)
        finally:
            await rag.stop()
