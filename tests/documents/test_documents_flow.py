"""The documents flow end to end on the embedded default: load, reload, change, delete, and
search, links and lifecycle through the `documents` service (real model, real spaCy)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from processors.base.client import RequestResponseClient
from processors.base.settings import RuntimeSettings
from processors.commands.system import System, embedded
from processors.models.embeddings.model import OnnxMiniLM
from processors.stores.settings import StoreSettings
from schemas import documents as msg
from schemas import services as sv
from schemas.communities import BuildCommunities, ListCommunities
from schemas.graph_embeddings import GraphEmbeddingsRequest
from schemas.graph_rag import GraphRagRequest

U, C = "alice", "papers"
DOCS = [
    msg.Document(
        id="curie", title="Marie Curie", text="Marie Curie was a physicist. She worked in Paris with Pierre Curie."
    ),
    msg.Document(id="paris", title="Paris", text="Paris is the capital of France. The Seine flows through Paris."),
    msg.Document(id="warsaw", title="Warsaw", text="Warsaw is the capital of Poland. Marie Curie was born in Warsaw."),
]


@pytest.fixture
async def system(tmp_path: Path) -> AsyncIterator[System]:
    async with embedded(StoreSettings(home=tmp_path / "home"), RuntimeSettings()) as s:
        yield s


def client(system: System, service):  # type: ignore[no-untyped-def]
    return RequestResponseClient.for_service(system.bus, service, "default", 120)


async def load(system: System, docs: list[msg.Document], user: str = U, coll: str = C) -> msg.LoadResponse:
    steps = [
        r
        async for r in client(system, sv.DOCUMENT_LOAD).stream(
            msg.LoadDocuments(user=user, collection=coll, documents=docs)
        )
    ]
    assert [s.stage for s in steps[:-1]] and steps[-1].end_of_stream
    return steps[-1]


async def search(system: System, text: str, scope: msg.Scope | None = None, user: str = U, limit: int = 10):  # type: ignore[no-untyped-def]
    vec = (await OnnxMiniLM.shared().embed([text]))[0]
    req = msg.ChunkSearch(user=user, collection=C, vector=vec, text=text, limit=limit, scope=scope)
    return (await client(system, sv.DOCUMENTS).request(req)).chunks


async def test_load_search_reload_and_lifecycle(system: System) -> None:
    first = await load(system, DOCS)
    assert first.loaded == 3 and first.unchanged == 0 and not first.failed and first.chunks == 3
    again = await load(system, DOCS)
    assert again.loaded == 0 and again.unchanged == 3  # same id + same text: nothing to do

    hits = await search(system, "Where was Marie Curie born?")
    assert hits[0].document_id == "warsaw" and hits[0].title == "Warsaw" and "born in Warsaw" in hits[0].text
    assert {h.document_id for h in hits} == {"curie", "paris", "warsaw"}

    # documents and concepts form one graph: "Marie Curie" in two documents is one entity
    links = (await client(system, sv.DOCUMENTS).request(
        msg.EntityChunks(user=U, collection=C, chunk_ids=[h.id for h in hits]))).links.mentions  # fmt: skip
    curie = {m.entity for m in links if m.entity.endswith("marie_curie")}
    assert len(curie) == 1
    by_entity = (
        await client(system, sv.DOCUMENTS).request(msg.EntityChunks(user=U, collection=C, entities=sorted(curie)))
    ).links
    assert {m.chunk_id for m in by_entity.mentions} == {h.id for h in hits if h.document_id in ("curie", "warsaw")}

    listed = (await client(system, sv.DOCUMENTS).request(msg.ListCollections(user=U))).collections
    assert [(c.collection, c.documents, c.chunks) for c in listed] == [(C, 3, 3)] and listed[0].entities > 5

    built = await client(system, sv.COMMUNITY_BUILD).request(BuildCommunities(user=U, collection=C))
    assert built.levels.get(0, 0) >= 1
    communities = (await client(system, sv.COMMUNITIES).request(ListCommunities(user=U, collection=C))).communities
    assert all(c.top_entity_labels for c in communities) and not any(c.stale for c in communities)

    # a changed document replaces its chunks; what only its old text said leaves the graph
    changed = DOCS[1].model_copy(update={"text": "Paris hosts the Louvre museum."})
    assert (await load(system, [changed])).loaded == 1
    texts = " ".join(h.text for h in await search(system, "Seine capital France Louvre"))
    assert "Louvre" in texts and "Seine" not in texts
    assert not any(m.entity.endswith("/seine") for m in (await client(system, sv.DOCUMENTS).request(
        msg.EntityChunks(user=U, collection=C, entities=["http://kgflow.org/e/seine"]))).links.mentions)  # fmt: skip
    stale = (await client(system, sv.COMMUNITIES).request(ListCommunities(user=U, collection=C))).communities
    assert any(c.stale for c in stale)

    deleted = await client(system, sv.DOCUMENT_STORE).request(
        msg.DeleteDocuments(user=U, collection=C, document_ids=["warsaw", "x"])
    )
    assert deleted.deleted == 1
    assert {h.document_id for h in await search(system, "Warsaw Poland")} == {"curie", "paris"}


async def test_scope_and_tenant_are_applied_inside_the_search(system: System) -> None:
    await load(system, DOCS)
    await load(system, [msg.Document(id="bob-doc", title="Warsaw", text="Warsaw is where Bob lives.")], user="bob")
    only = await search(system, "Marie Curie", msg.Scope(document_ids=["paris"]))
    assert {h.document_id for h in only} == {"paris"}  # the scope is searched exactly, not filtered afterwards
    assert await search(system, "Marie Curie", msg.Scope(document_ids=["nope"])) == []
    assert {h.document_id for h in await search(system, "Warsaw", user="bob")} == {"bob-doc"}
    assert "bob-doc" not in {h.document_id for h in await search(system, "Where does Bob live? Warsaw")}


async def test_metadata_scope(system: System) -> None:
    docs = [
        d.model_copy(update={"metadata": {"lang": "en", "tags": ["science"] if d.id == "curie" else ["city"]}})
        for d in DOCS
    ]
    await load(system, docs)
    science = await search(system, "capital", msg.Scope(metadata={"tags": "science"}))
    assert {h.document_id for h in science} == {"curie"}
    both = await search(system, "capital", msg.Scope(metadata={"tags": ["science", "city"], "lang": "en"}))
    assert {h.document_id for h in both} == {"curie", "paris", "warsaw"}
    assert await search(system, "capital", msg.Scope(metadata={"lang": "fr"})) == []


async def test_graph_rag_and_entity_search_respect_a_document_scope(system: System) -> None:
    await load(system, DOCS)
    vec = (await OnnxMiniLM.shared().embed(["Marie Curie Warsaw Paris"]))[0]
    ge = RequestResponseClient.for_service(system.bus, sv.GRAPH_EMBEDDINGS, "default", 60)
    scoped = GraphEmbeddingsRequest(user=U, collection=C, vector=vec, text="Marie Curie and Paris", limit=50,
                                    scope=msg.Scope(document_ids=["paris"]))  # fmt: skip
    found = {m.entity.value for m in (await ge.request(scoped)).entities}
    assert found and not any(e.endswith("marie_curie") or e.endswith("/warsaw") for e in found)
    assert any(e.endswith("/paris") for e in found)
    unscoped = {m.entity.value for m in (await ge.request(scoped.model_copy(update={"scope": None}))).entities}
    assert any(e.endswith("marie_curie") for e in unscoped)

    rag = RequestResponseClient.for_service(system.bus, sv.GRAPH_RAG, "default", 60)
    req = GraphRagRequest(user=U, collection=C, query="Where was Marie Curie born?", no_llm=True)
    everywhere = await rag.request(req)
    assert any("warsaw" in (t.o_id + t.s_id) for t in everywhere.triples)
    only_paris = await rag.request(req.model_copy(update={"scope": msg.Scope(document_ids=["paris"])}))
    ids = {x for t in only_paris.triples for x in (t.s_id, t.o_id)}
    assert not any(x.endswith("/warsaw") or x.endswith("marie_curie") for x in ids)
