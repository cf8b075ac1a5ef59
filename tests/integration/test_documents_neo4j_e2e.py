"""The documents flow end to end with every store on the real Neo4j (documents, chunks,
communities, triples and entity vectors): the scenario of tests/documents/test_documents_flow.py
(load, reload, search, links, scoped entity search and graph-rag, collections, communities,
change, delete, scope, tenants), then deleting the collections leaves no node of the users behind."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from processors.base.client import RequestResponseClient
from processors.base.settings import RuntimeSettings
from processors.commands.system import System, embedded
from processors.models.embeddings.model import OnnxMiniLM
from processors.stores.neo4j.schema import Neo4jConnection
from processors.stores.settings import StoreSettings
from schemas.communities import BuildCommunities, ListCommunities
from schemas.documents import (
    Chunk,
    ChunkSearch,
    DeleteCollection,
    DeleteDocuments,
    Document,
    EntityChunks,
    ListCollections,
    LoadDocuments,
    LoadResponse,
    Scope,
)
from schemas.graph_embeddings import GraphEmbeddingsRequest
from schemas.graph_rag import GraphRagRequest
from schemas.services import (
    COMMUNITIES,
    COMMUNITY_BUILD,
    DOCUMENT_LOAD,
    DOCUMENT_STORE,
    DOCUMENTS,
    GRAPH_EMBEDDINGS,
    GRAPH_RAG,
)
from tests.conftest import Servers
from tests.documents.test_documents_flow import DOCS

C = "papers"
LINKS = (
    "MATCH (a)-[x:HAS_CHUNK|HAS_ENTITY|REL_END|ABOUT|NAME_OF|KG_REL]->() WHERE a.user IN $users "
    "RETURN count(x) AS n, count(x.user) + count(x.collection) AS tenanted"
)


def client(system: System, service: Any) -> RequestResponseClient:
    """A client of one service of the default flow."""
    return RequestResponseClient.for_service(system.bus, service, "default", 120)


async def load(system: System, user: str, docs: list[Document]) -> LoadResponse:
    """Load documents; the last step of the stream is the report."""
    steps = [r async for r in client(system, DOCUMENT_LOAD).stream(LoadDocuments(user=user, collection=C,
                                                                                  documents=docs))]  # fmt: skip
    return steps[-1]


async def search(system: System, user: str, text: str, scope: Scope | None = None) -> list[Chunk]:
    """Fused chunk search with the real embedding model."""
    vec = (await OnnxMiniLM.shared().embed([text]))[0]
    req = ChunkSearch(user=user, collection=C, vector=vec, text=text, limit=10, scope=scope)
    return (await client(system, DOCUMENTS).request(req)).chunks


async def links(system: System, user: str, entities: list[str], chunk_ids: list[str]) -> set[tuple[str, str]]:
    """(entity, chunk) links of a neighbourhood."""
    req = EntityChunks(user=user, collection=C, entities=entities, chunk_ids=chunk_ids)
    return {(m.entity, m.chunk_id) for m in (await client(system, DOCUMENTS).request(req)).links.mentions}


async def scoped_graph(system: System, user: str) -> None:
    """Entity search and graph-rag keep to a document scope (the stores' scoped reads)."""
    vec = (await OnnxMiniLM.shared().embed(["Marie Curie Warsaw Paris"]))[0]
    scoped = GraphEmbeddingsRequest(user=user, collection=C, vector=vec, text="Marie Curie and Paris", limit=50,
                                    scope=Scope(document_ids=["paris"]))  # fmt: skip
    found = {m.entity.value for m in (await client(system, GRAPH_EMBEDDINGS).request(scoped)).entities}
    assert any(x.endswith("/paris") for x in found)
    assert not any(x.endswith("marie_curie") or x.endswith("/warsaw") for x in found)
    req = GraphRagRequest(user=user, collection=C, query="Where was Marie Curie born?", no_llm=True)
    everywhere = await client(system, GRAPH_RAG).request(req)
    assert any("warsaw" in (t.o_id + t.s_id) for t in everywhere.triples)
    only_paris = await client(system, GRAPH_RAG).request(
        req.model_copy(update={"scope": Scope(document_ids=["paris"])})
    )
    ids = {x for t in only_paris.triples for x in (t.s_id, t.o_id)}
    assert not any(x.endswith("/warsaw") or x.endswith("marie_curie") for x in ids)


async def scenario(system: System, user: str, bob: str) -> None:
    """The embedded flow's assertions, on Neo4j."""
    first = await load(system, user, DOCS)
    assert first.loaded == 3 and not first.failed and first.chunks == 3
    assert (await load(system, user, DOCS)).unchanged == 3
    hits = await search(system, user, "Where was Marie Curie born?")
    assert hits[0].document_id == "warsaw" and hits[0].title == "Warsaw" and "born in Warsaw" in hits[0].text
    curie = {en for en, _ in await links(system, user, [], [h.id for h in hits]) if en.endswith("marie_curie")}
    assert len(curie) == 1  # one entity for "Marie Curie" in two documents
    by_entity = {c for _, c in await links(system, user, sorted(curie), [])}
    assert by_entity == {h.id for h in hits if h.document_id in ("curie", "warsaw")}
    await scoped_graph(system, user)
    listed = (await client(system, DOCUMENTS).request(ListCollections(user=user))).collections
    assert [(c.collection, c.documents, c.chunks) for c in listed] == [(C, 3, 3)] and listed[0].entities > 5

    assert (await client(system, COMMUNITY_BUILD).request(BuildCommunities(user=user, collection=C))).levels.get(0, 0)
    listing = ListCommunities(user=user, collection=C)
    built = (await client(system, COMMUNITIES).request(listing)).communities
    assert built and all(c.top_entity_labels for c in built) and not any(c.stale for c in built)
    changed = DOCS[1].model_copy(update={"text": "Paris hosts the Louvre museum."})
    assert (await load(system, user, [changed])).loaded == 1
    texts = " ".join(h.text for h in await search(system, user, "Seine capital France Louvre"))
    assert "Louvre" in texts and "Seine" not in texts
    assert await links(system, user, ["http://kgflow.org/e/seine"], []) == set()
    assert any(c.stale for c in (await client(system, COMMUNITIES).request(listing)).communities)

    only = await search(system, user, "Marie Curie", Scope(document_ids=["paris"]))
    assert {h.document_id for h in only} == {"paris"}
    await load(system, bob, [Document(id="bob-doc", title="Warsaw", text="Warsaw is where Bob lives.")])
    assert {h.document_id for h in await search(system, bob, "Warsaw")} == {"bob-doc"}
    assert "bob-doc" not in {h.document_id for h in await search(system, user, "Where does Bob live? Warsaw")}
    req = DeleteDocuments(user=user, collection=C, document_ids=["warsaw", "x"])
    assert (await client(system, DOCUMENT_STORE).request(req)).deleted == 1
    assert {h.document_id for h in await search(system, user, "Warsaw Poland")} == {"curie", "paris"}


async def test_documents_flow_with_every_store_on_neo4j(servers: Servers, tmp_path: Path) -> None:
    tag = uuid.uuid4().hex[:8]
    user, bob = f"alice-{tag}", f"bob-{tag}"
    settings = StoreSettings(home=tmp_path / "home", documents_backend="neo4j", vectors_backend="neo4j",
                             triples_backend="neo4j", neo4j_url=servers.neo4j_url)  # fmt: skip
    conn = Neo4jConnection(servers.neo4j_url).acquire()
    count = "MATCH (n) WHERE n.user IN $users AND $label IN labels(n) RETURN count(n) AS n"
    try:
        async with embedded(settings, RuntimeSettings()) as system:
            try:
                await scenario(system, user, bob)
                chunks = await conn.read(count, {"users": [user], "label": "KgChunk"})
                assert chunks == [{"n": 2}]  # curie and the changed paris, in Neo4j
                # links carry no tenant (their ends do): a chunk's ~55 links are no property record each
                links = await conn.read(LINKS, {"users": [user, bob]})
                assert links[0]["n"] > 0 and links[0]["tenanted"] == 0
            finally:
                for u in (user, bob):
                    await client(system, DOCUMENT_STORE).request(DeleteCollection(user=u, collection=C))
            assert (await client(system, DOCUMENTS).request(ListCollections(user=user))).collections == []
        users = {"users": [user, bob]}
        left = await conn.read("MATCH (n) WHERE n.user IN $users AND NOT n:KgDeletion RETURN count(n) AS n", users)
        assert left == [{"n": 0}]
        # what stays is the collections' deletion marks (a write of a load begun before cannot bring them back)
        gone = await conn.read("MATCH (n:KgDeletion) WHERE n.user IN $users AND n.id = '' RETURN n.user AS u", users)
        assert sorted(r["u"] for r in gone) == sorted([user, bob])
    finally:
        await conn.release()


async def test_a_read_of_what_was_never_written_logs_no_warning(servers: Servers, caplog: Any) -> None:
    # a fresh database answers a read of a label or property nothing wrote yet (a collection's
    # vector model, before any load) with no rows, and the driver logged a warning for each
    conn = Neo4jConnection(servers.neo4j_url).acquire()
    absent = f"NeverWritten{uuid.uuid4().hex[:8]}"
    try:
        with caplog.at_level("WARNING", logger="neo4j"):
            query = f"MATCH (m:{absent} {{key: $key}}) RETURN m.{absent.lower()} AS v"  # our own names
            assert await conn.read(query, {"key": "x"}) == []
        assert [r.getMessage()[:80] for r in caplog.records if r.name.startswith("neo4j.notifications")] == []
    finally:
        await conn.release()
