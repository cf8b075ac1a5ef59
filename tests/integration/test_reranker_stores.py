"""The reranker's node distance on the real triple stores: every processor in one process on the
memory bus, triples and entity vectors on Cassandra or Neo4j (documents stay on SQLite: the
Neo4j document store is another branch's). A 3-hop distance Graphiti would call infinite, one
store round trip per BFS level (as counted where the backend sends it), and another tenant's
shortcut that must not count; and each backend's adjacency query (a BFS level) against its
neighbour query."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from processors.base.client import RequestResponseClient
from processors.base.settings import RuntimeSettings
from processors.commands.system import System, embedded
from processors.stores.settings import StoreSettings
from schemas.reranker import RerankItem, RerankRequest, RerankWeights
from schemas.services import RERANKER, TRIPLES_STORE
from schemas.tenant import Tenant
from schemas.terms import RDFS_LABEL, Term, Triple
from schemas.triples import StoreTriples
from tests.integration.store_fixtures import StoreBackend, nq, t
from tests.store_observer import observe_stores

PEOPLE = {"ada": "Ada Lovelace", "bob": "Bob Smith", "carl": "Carl Jung", "dora": "Dora Maar", "eve": "Eve Curie",
          "lima": "Lima"}  # fmt: skip
CHAIN = [("ada", "bob"), ("bob", "carl"), ("carl", "dora"), ("eve", "lima")]  # dora is 3 hops from ada
ONLY_DISTANCE = RerankWeights(original=0.0, episode=0.0, distance=1.0)


def iri(name: str) -> str:
    return f"http://example.org/{name}"


def graph(edges: list[tuple[str, str]]) -> list[Triple]:
    knows = Term.iri(iri("knows"))
    out = [Triple(s=Term.iri(iri(a)), p=knows, o=Term.iri(iri(b))) for a, b in edges]
    return out + [Triple(s=Term.iri(iri(k)), p=Term.iri(RDFS_LABEL), o=Term.literal(v)) for k, v in PEOPLE.items()]


def store_settings(backend: str, home: Path, servers: Any) -> StoreSettings:
    if backend == "neo4j":
        return StoreSettings(home=home, triples_backend="neo4j", vectors_backend="neo4j", neo4j_url=servers.neo4j_url)
    return StoreSettings(home=home, triples_backend="cassandra", vectors_backend="cassandra",
                         cassandra_hosts=servers.cassandra_host, cassandra_port=servers.cassandra_port,
                         cassandra_keyspace="kgflow_reranker_test")  # fmt: skip


@pytest.fixture(params=["cassandra", "neo4j"])
async def system(request: pytest.FixtureRequest, tmp_path: Path, servers: Any) -> AsyncIterator[tuple[System, str]]:
    tag = uuid.uuid4().hex[:10]
    async with embedded(store_settings(request.param, tmp_path / "home", servers), RuntimeSettings()) as s:
        try:
            yield s, tag
        finally:
            for user in (f"alice-{tag}", f"mallory-{tag}"):
                await s.stores.triples.delete_collection(Tenant(user, "kb"))
                await s.stores.entities.delete_collection(Tenant(user, "kb"))


async def test_distance_on_a_real_triple_store(system: tuple[System, str], monkeypatch: pytest.MonkeyPatch) -> None:
    s, tag = system
    alice, mallory = f"alice-{tag}", f"mallory-{tag}"
    triples = RequestResponseClient.for_service(s.bus, TRIPLES_STORE, "default", 300)
    await triples.request(StoreTriples(user=alice, collection="kb", triples=graph(CHAIN)))
    await triples.request(StoreTriples(user=mallory, collection="kb", triples=graph([("ada", "dora")])))
    reranker = RequestResponseClient.for_service(s.bus, RERANKER, "default", 300)
    items = [RerankItem(id=iri(n), kind="entity", score=sc) for n, sc in (("dora", 0.9), ("lima", 0.8), ("bob", 0.1))]

    def ask(user: str) -> RerankRequest:
        return RerankRequest(user=user, collection="kb", query="Who did Ada Lovelace meet?", results=items,
                             strategy="distance", weights=ONLY_DISTANCE)  # fmt: skip

    await reranker.request(ask(alice))  # connected and set up: what is counted below is the question's
    seen = observe_stores(monkeypatch)
    res = await reranker.request(ask(alice))
    assert res.question_entities == [iri("ada")]
    assert [r.id for r in res.results] == [iri("bob"), iri("dora"), iri("lima")]
    hops = {r.id: r.graph_context.min_distance for r in res.results}
    assert hops == {iri("bob"): 1, iri("dora"): 3, iri("lima"): None}
    assert res.results[1].graph_context.distance_score == pytest.approx(0.25)
    st = res.stats
    assert st is not None and (st.store_round_trips, st.store_requests) == (seen.calls, seen.requests)
    assert st.stage_store_round_trips["distance"] == 3  # one adjacency read per level: dora is 3 hops away
    assert st.stage_store_round_trips["lookup"] >= 1  # the seed search

    theirs = await reranker.request(ask(mallory))  # their graph has the shortcut; ours must not see it, nor they ours
    assert {r.id: r.graph_context.min_distance for r in theirs.results} == {iri("dora"): 1, iri("bob"): None,
                                                                             iri("lima"): None}  # fmt: skip

    hybrid = await reranker.request(ask(alice).model_copy(update={"strategy": "hybrid", "weights": None}))
    assert {r.id: r.graph_context.min_distance for r in hybrid.results}[iri("dora")] == 3
    assert all(r.graph_context.episode_mentions == 0 for r in hybrid.results)  # no timestamped documents


@pytest.mark.usefixtures("servers")
async def test_adjacency_is_what_a_neighbour_query_reads(store: StoreBackend) -> None:
    """Every backend's adjacency: the IRI edges its neighbour query reads first, as (s, o) pairs."""
    user, coll = store.scope()
    await store.triples.add_triples(Tenant(user, coll), [*graph(CHAIN), t(iri("bob"), iri("age"), Term.literal("42"))])
    for per in (1, 30):
        frontier = [iri("bob"), iri("carl"), iri("nobody")]
        pairs = await store.triples.adjacent(Tenant(user, coll), frontier, per)
        read = await store.triples.neighbours(nq(user, coll, frontier, per))
        assert set(pairs) == {(x.s.value, x.o.value) for x in read.triples if x.o.is_iri}  # neighbours dedupes
    everything = await store.triples.adjacent(Tenant(user, coll), [iri("bob"), iri("carl")], 30)
    assert sorted(everything) == sorted([(iri("ada"), iri("bob")), (iri("bob"), iri("carl")),
                                         (iri("bob"), iri("carl")), (iri("carl"), iri("dora"))])  # fmt: skip
    assert await store.triples.adjacent(Tenant(user, "other-" + coll), [iri("bob")], 30) == []
