"""The whole embedded system in one process: every processor's error handling, tenant
isolation, what a question's stats say it cost the store, and the sample question."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from processors.base.client import RequestResponseClient
from processors.commands.system import System, embedded
from processors.ingest.triples.loader import load_triples
from processors.ingest.triples.readers import read_triples
from processors.models.embeddings.model import OnnxMiniLM
from processors.stores.factory import open_stores
from processors.stores.settings import StoreSettings
from schemas.embeddings import EmbeddingsResponse
from schemas.graph_embeddings import GraphEmbeddingsResponse
from schemas.graph_rag import GraphRagRequest, GraphRagResponse
from schemas.labels import LabelResponse
from schemas.tenant import Tenant
from schemas.terms import Term, Triple
from schemas.text_completion import TextCompletionResponse
from schemas.topics import topic
from schemas.triples import TriplesResponse
from tests.store_observer import Observed, observe_stores

ROOT = Path(__file__).resolve().parents[2]
SERVICES = {
    "embeddings": (EmbeddingsResponse, {"texts": []}),
    "graph-embeddings": (GraphEmbeddingsResponse, {"user": "u", "vector": [0.1]}),
    "triples": (TriplesResponse, {"operation": "labels", "user": "u", "iris": ["x"]}),
    "label-resolver": (LabelResponse, {"user": "u", "iris": ["x"]}),
    "graph-rag": (GraphRagResponse, {"user": "u", "query": "who?"}),
    "text-completion": (TextCompletionResponse, {"prompt": ""}),
}


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("embedded")

    async def load() -> None:
        stores = open_stores(StoreSettings(home=home))
        emb = OnnxMiniLM.shared()
        await load_triples(stores, emb, Tenant("alice", "demo"), read_triples(ROOT / "examples" / "sample.tsv"))
        secret = Triple(s=Term.iri("urn:x:vault"), p=Term.iri("urn:x:holds"), o=Term.literal("the launch codes"))
        label = Triple(
            s=Term.iri("urn:x:vault"),
            p=Term.iri("http://www.w3.org/2000/01/rdf-schema#label"),
            o=Term.literal("marie curie vault"),
        )
        await load_triples(stores, emb, Tenant("bob", "private"), [secret, label])
        await stores.close()

    asyncio.run(load())
    return home


@pytest.fixture
async def system(home: Path) -> AsyncIterator[System]:
    async with embedded(StoreSettings(home=home)) as s:
        yield s


def rag(system: System) -> RequestResponseClient[GraphRagResponse]:
    return RequestResponseClient(
        system.bus, topic("graph-rag", "default"), topic("graph-rag", "default", "response"), GraphRagResponse, 30
    )


async def _raw(system: System, service: str, payload: bytes) -> dict:
    reader = await system.bus.reader(topic(service, "default", "response"))
    prod = await system.bus.producer(topic(service, "default"))
    await prod.send(payload, {"id": "raw-1"})
    msg = await asyncio.wait_for(reader.receive(), 10)
    await reader.close()
    return json.loads(msg.data)


@pytest.mark.parametrize("service", sorted(SERVICES))
async def test_every_processor_answers_malformed_input_with_an_error(system: System, service: str) -> None:
    garbage = await _raw(system, service, b"\x00not json")
    assert garbage["error"]["type"] == "bad-request"
    _, invalid = SERVICES[service]
    bad = await _raw(system, service, json.dumps(invalid).encode())
    assert bad["error"]["type"] == "bad-request"
    if "user" in invalid:
        assert "collection" in bad["error"]["message"]  # the missing scope is named
    # ...and the processor keeps serving.
    res = await rag(system).request(GraphRagRequest(query="marie curie", user="alice", collection="demo", no_llm=True))
    assert res.triples


async def test_sample_question_retrieves_the_answer(system: System) -> None:
    res = await rag(system).request(
        GraphRagRequest(query="Where was marie_curie's husband born?", user="alice", collection="demo", no_llm=True)
    )
    facts = {(t.s, t.p, t.o) for t in res.triples}
    assert ("pierre curie", "place of birth", "paris") in facts
    assert res.entities[0].label == "marie curie" and res.entities[0].lexical
    assert res.response.startswith("No language model is configured")


@pytest.mark.parametrize("traversal", ["relevance", "bfs"])
async def test_stats_count_what_the_stores_were_asked(
    system: System, traversal: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A question's store round trips and requests are what SQLite was asked (observed at the pool
    and by the engine's statement trace), split over its stages; a label the cache holds costs none."""
    c = rag(system)
    seen = observe_stores(monkeypatch)
    for path_length in (1, 2, 3):
        for q in ["marie curie", "nobel prize in physics winners", "what is in paris?"]:
            before = Observed(seen.calls, seen.requests)
            res = await c.request(
                GraphRagRequest(
                    query=q,
                    user="alice",
                    collection="demo",
                    no_llm=True,
                    max_path_length=path_length,
                    traversal=traversal,
                )  # fmt: skip
            )
            st = res.stats
            assert st is not None
            assert (st.store_round_trips, st.store_requests) == (
                seen.calls - before.calls,
                seen.requests - before.requests,
            )
            assert sum(st.stage_store_round_trips.values()) == st.store_round_trips
            assert sum(st.stage_store_requests.values()) == st.store_requests
            assert st.stage_store_requests["embed"] == 0
            hops = [f"hop_{i}" for i in range(1, st.levels + 1)]
            assert all(st.stage_store_round_trips[h] >= 1 for h in hops)  # the frontier's read, at least
            # the frontier's out- and in-edge scans (SQLite reads each entity's edges one statement a direction)
            assert all(st.stage_store_requests[h] >= 2 for h in hops)
            misses = 1 if st.label_cache_misses else 0  # one SELECT for every label the cache lacks
            assert (st.stage_store_round_trips["labels"], st.stage_store_requests["labels"]) == (misses, misses)


async def test_tenant_isolation(system: System) -> None:
    c = rag(system)
    for user, collection in [("alice", "demo"), ("alice", "private"), ("bob", "demo")]:
        res = await c.request(
            GraphRagRequest(query="marie curie vault launch codes", user=user, collection=collection, no_llm=True)
        )
        seen = {t.o for t in res.triples} | {e.id for e in res.entities}
        assert "the launch codes" not in seen and "urn:x:vault" not in seen
    own = await c.request(GraphRagRequest(query="marie curie vault", user="bob", collection="private", no_llm=True))
    assert "the launch codes" in {t.o for t in own.triples}


async def test_unknown_collection_is_empty_not_an_error(system: System) -> None:
    res = await rag(system).request(GraphRagRequest(query="marie curie", user="alice", collection="nope", no_llm=True))
    assert res.error is None and res.triples == [] and res.entities == []


async def test_timeout_is_a_typed_error_and_service_continues(system: System) -> None:
    c = rag(system)
    with pytest.raises(Exception) as e:
        await c.request(
            GraphRagRequest(query="marie curie", user="alice", collection="demo", no_llm=True, timeout_s=0.000001)
        )
    assert getattr(e.value, "type", None) == "timeout"
    ok = await c.request(GraphRagRequest(query="marie curie", user="alice", collection="demo", no_llm=True))
    assert ok.triples


async def test_streaming_sends_explain_then_final(system: System) -> None:
    frames = [
        r
        async for r in rag(system).stream(
            GraphRagRequest(query="marie curie spouse", user="alice", collection="demo", streaming=True)
        )
    ]
    assert frames[0].message_type == "explain" and frames[0].triples and not frames[0].end_of_session
    assert frames[-1].end_of_session and frames[-1].end_of_stream
    assert "No language model is configured" in "".join(f.response for f in frames)
