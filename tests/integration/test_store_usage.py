"""What a request reports it cost the stores is what the stores were asked, on every backend:
compared with the drivers observed from outside (tests/store_observer.py), and, where a backend's
reads are fixed by its design, with the exact numbers (a Cassandra hop's three dependent reads,
a scoped entity search's four sequential store calls, `of-entities` with summaries)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from processors.accounting.usage import StoreUsage, counting
from processors.base.client import RequestResponseClient
from processors.base.settings import RuntimeSettings
from processors.commands.system import System, embedded
from processors.models.embeddings.model import OnnxMiniLM
from processors.stores.documents_protocol import ChunkQuery
from processors.stores.settings import StoreSettings
from schemas.communities import BuildCommunities, CommunitiesOf
from schemas.documents import DeleteCollection, LoadDocuments, Scope
from schemas.graph_embeddings import GraphEmbeddingsRequest
from schemas.graph_rag import GraphRagRequest
from schemas.services import COMMUNITIES, COMMUNITY_BUILD, DOCUMENT_LOAD, DOCUMENT_STORE, GRAPH_EMBEDDINGS, GRAPH_RAG
from schemas.tenant import Tenant
from schemas.terms import RDFS_LABEL, Term
from tests.documents.test_documents_flow import DOCS
from tests.integration.store_fixtures import GRAPH, StoreBackend, nq, t, unit
from tests.store_observer import Observed, observe_stores

pytestmark = pytest.mark.usefixtures("servers")


def spent(seen: Observed, before: Observed) -> StoreUsage:
    """What the drivers were asked since `before`."""
    return StoreUsage(seen.requests - before.requests, seen.calls - before.calls)


async def test_reads_count_what_the_driver_was_asked(store: StoreBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    user, coll = store.scope()
    await store.triples.add_triples(Tenant(user, coll), GRAPH)
    seen = observe_stores(monkeypatch)
    with counting() as usage:
        await store.triples.pattern(Tenant(user, coll), Term.iri("a"), None, None, 10)
        await store.triples.labels(Tenant(user, coll), ["a", "b", "c"])
        await store.triples.adjacent(Tenant(user, coll), ["a", "b"], 5)
        await store.triples.load_state(Tenant(user, coll))
        await store.triples.collections(user)
    assert usage == StoreUsage(seen.requests, seen.calls) and usage.round_trips == 5
    # a frontier in one call: SQLite scans each entity's out- and in-edges (a statement each),
    # Cassandra sends one IN query a direction, Neo4j one query
    before = Observed(seen.calls, seen.requests)
    with counting() as usage:
        await store.triples.neighbours(nq(user, coll, ["a", "b"], 10, "both"))
    expected = {"sqlite": 4, "cassandra": 2, "neo4j": 1}[store.name]
    assert usage == spent(seen, before) == StoreUsage(expected, 1)


async def test_writes_count_what_the_driver_was_asked(store: StoreBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    if store.name == "sqlite":  # the engine traces an executemany row by row: counted per batch here
        user, coll = store.scope()
        with counting() as usage:
            await store.triples.add_triples(Tenant(user, coll), GRAPH)
        # the scope, the terms (a batch table made if missing, cleared, filled; the new terms stored,
        # their ids read),
        # the triples, the graph version, the labels: one pool write
        assert usage == StoreUsage(9, 1)
        return
    user, coll = store.scope()
    seen = observe_stores(monkeypatch)
    with counting() as usage:
        await store.triples.add_triples(Tenant(user, coll), GRAPH)
        await store.index.upsert(
            Tenant(user, coll), [("a", "Alpha", unit(1)), ("b", "Bee", unit(2))], model="unit-test"
        )
    assert usage == StoreUsage(seen.requests, seen.calls) and usage.requests >= usage.round_trips >= 2


async def test_a_cassandra_hop_reports_its_three_dependent_reads(
    store: StoreBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scored hop on a hub: its first edges, then the focus predicates' edges the first read
    cannot hold, then the vectors of what was found: three reads one after the other on Cassandra
    (five requests: a direction each, then a focus predicate and direction each, then the vectors),
    one query on Neo4j."""
    user, coll = store.scope()
    hub = [t("h", "a", f"x{i:02}") for i in range(12)] + [t("h", "z", f"w{i}") for i in range(3)]
    hub += [t(f"y{i:02}", "a", "h") for i in range(12)] + [t(f"v{i}", "z", "h") for i in range(3)]
    await store.triples.add_triples(Tenant(user, coll), [*hub, t("h", RDFS_LABEL, Term.literal("Hub"))])
    ends = sorted({x.s.value for x in hub} | {x.o.value for x in hub})
    await store.index.upsert(
        Tenant(user, coll), [(e, f"entity {e}", unit(10 + n)) for n, e in enumerate(ends)], model="unit-test"
    )
    await store.index.upsert(
        Tenant(user, coll), [("a", "rel a", unit(90)), ("z", "rel z", unit(91))], kind="predicate", model="unit-test"
    )
    seen = observe_stores(monkeypatch)
    query = nq(user, coll, ["h"], 2, "both", query_vector=unit(91), max_returned=8, focus=["z"], focus_limit=2)
    with counting() as usage:
        res = await store.triples.neighbours(query)
    assert any(x.p.value == "z" for x in res.triples)  # the focus read found the hub's "z" edges
    assert usage == StoreUsage(seen.requests, seen.calls)
    if store.name == "cassandra":
        assert usage == StoreUsage(requests=5, round_trips=3)
    elif store.name == "neo4j":
        assert usage == StoreUsage(requests=1, round_trips=1)
    else:  # the scans in one read; the local index's vectors are in memory (read when they changed)
        assert usage.round_trips >= 1 and usage.requests >= 4


def _settings(backend: str, home: Path, servers: Any, keyspace: str) -> StoreSettings:
    if backend == "neo4j":
        return StoreSettings(home=home, triples_backend="neo4j", vectors_backend="neo4j", documents_backend="neo4j",
                             neo4j_url=servers.neo4j_url)  # fmt: skip
    if backend == "cassandra":  # documents stay on SQLite: Cassandra holds triples and vectors only
        return StoreSettings(home=home, triples_backend="cassandra", vectors_backend="cassandra",
                             cassandra_hosts=servers.cassandra_host, cassandra_port=servers.cassandra_port,
                             cassandra_keyspace=keyspace)  # fmt: skip
    return StoreSettings(home=home)


@pytest.fixture(params=["sqlite", "cassandra", "neo4j"])
async def loaded(
    request: pytest.FixtureRequest, tmp_path: Path, servers: Any, cassandra_conn: Any
) -> AsyncIterator[tuple[System, str]]:
    """A system on one backend with the documents of the documents flow loaded and communities built."""
    user = f"usage-{uuid.uuid4().hex[:8]}"
    settings = _settings(request.param, tmp_path / "home", servers, cassandra_conn.keyspace)
    async with embedded(settings, RuntimeSettings()) as system:
        try:
            steps = client(system, DOCUMENT_LOAD).stream(LoadDocuments(user=user, collection="c", documents=DOCS))
            assert [s async for s in steps][-1].loaded == len(DOCS)
            await client(system, COMMUNITY_BUILD).request(BuildCommunities(user=user, collection="c"))
            yield system, user
        finally:
            await client(system, DOCUMENT_STORE).request(DeleteCollection(user=user, collection="c"))


def client(system: System, service: Any) -> RequestResponseClient:
    """A client of one service of the default flow."""
    return RequestResponseClient.for_service(system.bus, service, "default", 120)


async def test_services_report_what_their_stores_were_asked(
    loaded: tuple[System, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    system, user = loaded
    vector = (await OnnxMiniLM.shared().embed(["Marie Curie and Paris"]))[0]
    scoped = GraphEmbeddingsRequest(user=user, collection="c", vector=vector, text="Marie Curie and Paris", limit=20,
                                    scope=Scope(document_ids=["paris"]))  # fmt: skip
    question = GraphRagRequest(query="Where did Marie Curie work?", user=user, collection="c", no_llm=True)
    of = CommunitiesOf(user=user, collection="c", entities=["http://kgflow.org/e/paris"], summarize=True)
    for warm_up in (scoped, of):  # connections and caches opened: below, each request's own reads
        await client(system, GRAPH_EMBEDDINGS if warm_up is scoped else COMMUNITIES).request(warm_up)
    seen = observe_stores(monkeypatch)

    # the scoped entity search: the scope's entities, their similarities, the entities the text
    # names, their labels, one after the other (and the collection's state beside them)
    with counting() as usage:
        found = await client(system, GRAPH_EMBEDDINGS).request(scoped)
    assert found.entities and usage == StoreUsage(seen.requests, seen.calls)
    assert usage.round_trips >= 4 and usage.requests >= usage.round_trips

    # of-entities with summaries: membership, the communities, their labels, their chunks and their
    # membership hashes (no model: nothing written)
    before = Observed(seen.calls, seen.requests)
    with counting() as usage:
        res = await client(system, COMMUNITIES).request(of)
    assert res.communities and usage == spent(seen, before) and usage.round_trips >= 5

    before = Observed(seen.calls, seen.requests)
    answer = await client(system, GRAPH_RAG).request(question)
    st = answer.stats
    assert st is not None and StoreUsage(st.store_requests, st.store_round_trips) == spent(seen, before)
    assert sum(st.stage_store_round_trips.values()) == st.store_round_trips
    assert sum(st.stage_store_requests.values()) == st.store_requests
    assert st.stage_store_requests["embed"] == 0 and st.stage_store_round_trips["seeds"] >= 1


async def test_chunk_reads_count_what_the_driver_was_asked(
    loaded: tuple[System, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The documents store's question-time reads (graphrank's candidates, named concepts and hop
    links; chunk similarities; concept keys and claims) report what reached the store: on SQLite
    (also the Cassandra deployment's documents) and on Neo4j."""
    system, user = loaded
    docs = system.stores.documents
    vector = (await OnnxMiniLM.shared().embed(["Where was Marie Curie born?"]))[0]
    q = ChunkQuery(Tenant(user, "c"), vector)
    found = await docs.candidates(q, ["marie", "curie", "born"], 5)  # warm-up: connections opened
    ids = [p.id for p in found.passages]
    assert ids
    seen = observe_stores(monkeypatch)
    with counting() as usage:
        await docs.candidates(q, ["marie", "curie", "born"], 5)
        await docs.named(q, ["marie curie", "paris"])
        await docs.passage_links(q, ids, set(), 10, set())
        await docs.chunk_similarities(q, ids)
        await docs.concept_keys(Tenant(user, "c"), ["marie curie", "warsaw"])
        await docs.claimed(Tenant(user, "c"), ["http://kgflow.org/e/paris"])
    assert usage == StoreUsage(seen.requests, seen.calls)
    assert usage.round_trips >= 6 and usage.requests >= usage.round_trips
