"""The reranker over the memory bus on the embedded default (SQLite documents, triples and local
vectors, the real model): each strategy on a small graph built from timestamped documents, a
3-hop distance, tenant and document scope, the weight error on the wire, and graph-rag,
lazy-rag and kg-query calling it through their `reranker` parameter."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from processors.base.client import RemoteError, RequestResponseClient
from processors.base.settings import RuntimeSettings
from processors.commands.system import System, embedded
from processors.retrieval.reranker.rerank import NO_ENTITIES
from processors.stores.settings import StoreSettings
from schemas.documents import ChunkSearch, Document, LoadDocuments, Scope
from schemas.graph_rag import GraphRagRequest
from schemas.kg_query import KgQueryRequest
from schemas.lazy_rag import LazyRagRequest
from schemas.reranker import RerankItem, RerankRequest, RerankResponse, RerankWeights
from schemas.services import DOCUMENT_LOAD, DOCUMENTS, GRAPH_RAG, KG_QUERY, LAZY_RAG, RERANKER
from tests.store_observer import observe_stores

U, C = "alice", "kb"
NOW = datetime.now(UTC)
# Co-occurrence makes a chain ada - bob - carl - dora (dora 3 hops from ada); eve is elsewhere.
DOCS = [
    Document(id="a", text="Ada Lovelace met Bob Smith in London.", timestamp=NOW - timedelta(days=1)),
    Document(id="b", text="Bob Smith visited Carl Jung in Zurich.", timestamp=NOW - timedelta(days=2)),
    Document(id="c", text="Carl Jung wrote to Dora Maar about painting.", timestamp=NOW - timedelta(days=200)),
    Document(id="d", text="Eve Curie lived in Lima with Frank Ocean."),  # no timestamp: no episode
]
# Another tenant, same collection name: a shortcut ada - dora and recent episodes of both.
MALLORY = [Document(id="m", text="Dora Maar met Ada Lovelace in London.", timestamp=NOW - timedelta(days=1))]
ASK = "Who did Ada Lovelace meet?"
ONLY_DISTANCE = RerankWeights(original=0.0, episode=0.0, distance=1.0)
ONLY_EPISODES = RerankWeights(original=0.0, episode=1.0, distance=0.0)


def e(name: str) -> str:
    return "http://kgflow.org/e/" + name


def client(system: System, service):  # type: ignore[no-untyped-def]
    return RequestResponseClient.for_service(system.bus, service, "default", 120)


@pytest.fixture
async def system(tmp_path: Path) -> AsyncIterator[System]:
    async with embedded(StoreSettings(home=tmp_path / "home"), RuntimeSettings()) as s:
        await client(s, DOCUMENT_LOAD).request(LoadDocuments(user=U, collection=C, documents=DOCS))
        await client(s, DOCUMENT_LOAD).request(LoadDocuments(user="mallory", collection=C, documents=MALLORY))
        yield s


async def chunk_of(system: System, user: str = U) -> dict[str, str]:
    """Document id -> its (only) chunk id."""
    req = ChunkSearch(user=user, collection=C, text="Ada Bob Carl Dora Eve Lima", mode="lexical", limit=20)
    return {c.document_id: c.id for c in (await client(system, DOCUMENTS).request(req)).chunks}


async def rerank(system: System, items: list[RerankItem], **kw: object) -> RerankResponse:
    req = RerankRequest(user=U, collection=C, query=kw.pop("query", ASK), results=items, as_of=NOW, **kw)  # type: ignore[arg-type]
    return await client(system, RERANKER).request(req)


def ents(*names: str, score: float = 0.5) -> list[RerankItem]:
    return [RerankItem(id=e(n), kind="entity", score=score) for n in names]


async def test_distance_finds_three_hops_from_the_question(system: System) -> None:
    items = [*ents("dora_maar", score=0.9), *ents("lima", score=0.8), *ents("bob_smith", score=0.1)]
    res = await rerank(system, items, strategy="distance", weights=ONLY_DISTANCE)
    assert res.question_entities == [e("ada_lovelace")]
    assert [r.id for r in res.results] == [e("bob_smith"), e("dora_maar"), e("lima")]
    hops = {r.id: r.graph_context.min_distance for r in res.results}
    assert hops == {e("bob_smith"): 1, e("dora_maar"): 3, e("lima"): None}  # mallory's ada - dora edge is not ours
    # the whole search is one read of the graph the embedded store holds (a server store reads a
    # level per round trip: tests/integration/test_reranker_stores.py)
    assert res.stats is not None and res.stats.stage_store_round_trips["distance"] == 1
    assert res.stats.stage_store_round_trips["lookup"] >= 1  # the seed search
    assert {"lookup", "distance"} <= set(res.stats.stage_ms)


async def test_episodes_count_recent_timestamped_documents(system: System, monkeypatch: pytest.MonkeyPatch) -> None:
    names = ("ada_lovelace", "bob_smith", "carl_jung", "dora_maar", "eve_curie")
    res = await rerank(system, ents(*names), strategy="episode", weights=ONLY_EPISODES)
    got = {r.id: r.graph_context.episode_mentions for r in res.results}
    # bob: documents a and b; carl: b (c is 200 days old); eve: only an untimed document; mallory's never count
    assert got == {e("ada_lovelace"): 1, e("bob_smith"): 2, e("carl_jung"): 1, e("dora_maar"): 0, e("eve_curie"): 0}
    assert [r.id for r in res.results] == [e(n) for n in ("bob_smith", "ada_lovelace", "carl_jung", "dora_maar",
                                                             "eve_curie")]  # fmt: skip
    assert res.results[0].graph_context.episode_score == 1.0 and res.results[1].graph_context.episode_score == 0.5
    wide = await rerank(system, ents(*names), strategy="episode", window_days=365)
    assert {r.id: r.graph_context.episode_mentions for r in wide.results}[e("dora_maar")] == 1
    # chunks: their entities are what they mention, looked up with the episodes in one store call
    chunk = await chunk_of(system)
    items = [RerankItem(id=chunk[d], kind="chunk", score=0.5) for d in ("d", "c", "a")]
    seen = observe_stores(monkeypatch)
    res = await rerank(system, items, strategy="episode", weights=ONLY_EPISODES)
    assert [r.id for r in res.results] == [chunk["a"], chunk["c"], chunk["d"]]
    assert res.stats is not None and (res.stats.store_round_trips, res.stats.store_requests) == (
        seen.calls,
        seen.requests,
    )
    assert res.stats.stage_store_round_trips["lookup"] == seen.calls >= 1


async def test_hybrid_tenant_and_scope(system: System) -> None:
    chunk, theirs = await chunk_of(system), await chunk_of(system, "mallory")
    items = [RerankItem(id=theirs["m"], kind="chunk", score=1.0), RerankItem(id=chunk["a"], kind="chunk", score=0.5)]
    res = await rerank(system, items, strategy="hybrid")
    other = next(r for r in res.results if r.id == theirs["m"])
    # a result of another tenant is looked up under ours: it has no entities here, so no context
    ctx = other.graph_context
    assert (ctx.episode_mentions, ctx.min_distance, ctx.distance_score, ctx.note) == (0, None, 0.0, NO_ENTITIES)
    assert res.results[0].id == chunk["a"]  # mentions ada (a question entity) in a recent episode
    assert res.results[0].graph_context.min_distance == 0 and res.results[0].graph_context.episode_mentions == 2

    # scope: without document b, bob - carl is gone (so dora is out of reach) and bob has one episode
    scoped = await rerank(
        system, ents("bob_smith", "dora_maar"), strategy="hybrid", scope=Scope(document_ids=["a", "c"])
    )
    ctx_of = {r.id: r.graph_context for r in scoped.results}
    assert ctx_of[e("bob_smith")].min_distance == 1 and ctx_of[e("bob_smith")].episode_mentions == 1
    assert ctx_of[e("dora_maar")].min_distance is None
    whole = await rerank(system, ents("bob_smith", "dora_maar"), strategy="hybrid")
    assert {r.id: r.graph_context.min_distance for r in whole.results}[e("dora_maar")] == 3


async def test_semantic_uses_stored_chunk_vectors(system: System, monkeypatch: pytest.MonkeyPatch) -> None:
    chunk = await chunk_of(system)
    items = [RerankItem(id=chunk[d], kind="chunk", score=0.5) for d in ("a", "b", "c", "d")]
    seen = observe_stores(monkeypatch)
    res = await rerank(system, items, strategy="semantic", query="Who did Carl Jung write to about painting?")
    assert res.results[0].id == chunk["c"]
    assert all(r.graph_context.semantic_score is not None for r in res.results)
    assert res.stats is not None and res.stats.stage_store_round_trips["embed"] == 0
    # the stored vectors: from the chunk index the store holds in memory (0 reads while it is current)
    assert res.stats.stage_store_round_trips["lookup"] == res.stats.store_round_trips == seen.calls


async def test_semantic_embeds_any_number_of_texts_the_request_may_hold(system: System) -> None:
    """Results with no stored vector have their text embedded: 1,025 short ones (over one embeddings
    request's 1,024 texts) and 80 of 400 characters (~11,000 tokens, over its 8,192-token budget)
    are all scored."""
    painting = "Carl Jung wrote to Dora Maar about painting. "
    for n, text in ((1025, "passage {i}"), (80, "passage {i}: " + "words of a long passage " * 16)):
        items = [RerankItem(id=f"x{i}", kind="chunk", score=0.1, text=text.format(i=i)[:400]) for i in range(n)]
        items[n // 2] = RerankItem(id="painting", kind="chunk", score=0.1, text=painting * 8)
        res = await rerank(system, items, strategy="semantic", query="Who did Carl Jung write to about painting?")
        assert len(res.results) == n and res.results[0].id == "painting"
        assert all(r.graph_context.semantic_score is not None for r in res.results)


async def test_bad_weights_are_a_bad_request_naming_them(system: System) -> None:
    bad = RerankRequest.model_construct(
        user=U, collection=C, query=ASK, results=[], weights=RerankWeights.model_construct(original=0.9, episode=0.3,
                                                                                            distance=0.3)
    )  # fmt: skip
    with pytest.raises(RemoteError) as err:
        await client(system, RERANKER).request(bad)
    assert err.value.type == "bad-request"
    assert "weights original=0.9, episode=0.3, distance=0.3 sum to 1.5" in err.value.message


async def test_retrieval_services_rerank_through_their_parameter(system: System) -> None:
    lazy = client(system, LAZY_RAG)
    plain = await lazy.request(LazyRagRequest(user=U, collection=C, query=ASK, no_llm=True))
    ranked = await lazy.request(LazyRagRequest(user=U, collection=C, query=ASK, no_llm=True, reranker="distance"))
    assert plain.stats is not None and ranked.stats is not None
    assert "rerank" not in plain.stats.stage_ms and "rerank" in ranked.stats.stage_ms
    assert ranked.stats.stage_store_round_trips["rerank"] > 0  # the reranker's reads, reported back
    scores = [c.score or 0.0 for c in ranked.chunks]
    assert scores == sorted(scores, reverse=True) and {c.id for c in ranked.chunks} == {c.id for c in plain.chunks}

    kg = await client(system, KG_QUERY).request(
        KgQueryRequest(user=U, collection=C, query=ASK, no_llm=True, reranker="episode")
    )
    assert kg.stats is not None and "rerank" in kg.stats.stage_ms and kg.chunks

    rag = client(system, GRAPH_RAG)
    base = await rag.request(GraphRagRequest(user=U, collection=C, query=ASK, no_llm=True))
    hybrid = await rag.request(GraphRagRequest(user=U, collection=C, query=ASK, no_llm=True, reranker="hybrid"))
    assert hybrid.stats is not None and "rerank" in hybrid.stats.stage_ms and "rerank" not in base.stats.stage_ms
    assert {(t.s_id, t.o_id) for t in hybrid.triples} == {(t.s_id, t.o_id) for t in base.triples}
    scores = [t.score or 0.0 for t in hybrid.triples]
    assert scores == sorted(scores, reverse=True)
