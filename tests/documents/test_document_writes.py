"""Document writes that stop part-way, then run again, end where one clean load ends: every mentioned
entity labelled, the concepts documents created owned (so deleting every document takes them), the
same counts; while a write is unfinished queries say the collection is incomplete. Two loads that
find the same new concept at once label it once. The embedded default, the real model; a write
"killed" at a point is one whose store call there fails (what was written before it stays)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from processors.base.client import RemoteError, RequestResponseClient
from processors.base.offload import Offload
from processors.base.settings import RuntimeSettings
from processors.commands.system import System, embedded
from processors.ingest.documents.service import BusIngest
from processors.stores.settings import StoreSettings
from schemas.base import COLLECTION_DELETED
from schemas.documents import (
    DeleteCollection,
    DeleteDocuments,
    Document,
    DocumentStatus,
    IndexedDocument,
    LoadDocuments,
    LoadResponse,
    StoreDocuments,
    WriteMark,
)
from schemas.graph_rag import GraphRagRequest
from schemas.kg_query import KgQueryRequest
from schemas.lazy_rag import LazyRagRequest
from schemas.services import DOCUMENT_LOAD, DOCUMENT_STORE, DOCUMENTS, GRAPH_RAG, KG_QUERY, LAZY_RAG
from schemas.tenant import Tenant
from schemas.terms import RDFS_LABEL, Term

U = "alice"
DOCS = [
    Document(id="a", text="Ada Lovelace met Charles Babbage in London. Babbage built the Difference Engine."),
    Document(id="b", text="Marie Curie and Pierre Curie worked in Paris on radium and polonium."),
    Document(id="c", text="Alan Turing studied in Cambridge. Turing broke the Enigma code at Bletchley Park."),
    Document(id="d", text="Grace Hopper wrote the first compiler. Hopper served in the United States Navy."),
]
OWNED = (
    "SELECT iri FROM concepts WHERE collection = ? AND owned = 1 AND iri IN (SELECT entity FROM mentions) ORDER BY iri"
)
# store calls a killed write may stop at, in the order the writer makes them
KILL_POINTS = [("documents", "claim"), ("entities", "upsert"), ("triples", "add_triples"), ("documents", "store")]


def client(system: System, service):  # type: ignore[no-untyped-def]
    return RequestResponseClient.for_service(system.bus, service, "default", 300)


@pytest.fixture
async def system(tmp_path: Path) -> AsyncIterator[System]:
    async with embedded(StoreSettings(home=tmp_path / "home"), RuntimeSettings()) as s:
        yield s


async def load(system: System, collection: str, docs: list[Document] = DOCS) -> LoadResponse:
    return await client(system, DOCUMENT_LOAD).request(LoadDocuments(user=U, collection=collection, documents=docs))


async def state(system: System, home: Path, collection: str) -> dict[str, Any]:
    """What a collection holds: counts, unlabelled mentioned entities, owned concepts."""
    stores = system.stores
    with sqlite3.connect(home / "docs.db") as conn:
        mentioned = sorted(
            {r[0] for r in conn.execute("SELECT entity FROM mentions WHERE collection = ?", (collection,))}
        )
        docs = conn.execute("SELECT count(*) FROM documents WHERE collection = ?", (collection,)).fetchone()[0]
        owned = [r[0] for r in conn.execute(OWNED, (collection,))]
    labels = await stores.triples.labels(Tenant(U, collection), mentioned)
    triples = await stores.triples.pattern(Tenant(U, collection), None, None, None, 1_000_000)
    label_triples = [t for t in triples if t.p.value == RDFS_LABEL]
    return {
        "documents": docs,
        "triples": len(triples),
        "label_triples": len(label_triples),
        "labelled_twice": len(label_triples) - len({t.s.value for t in label_triples}),
        "vectors": (await stores.entities.collections(U)).get(collection, 0),
        "unlabelled": [e for e in mentioned if e not in labels],
        "owned": owned,
    }


async def delete_all(system: System, collection: str) -> None:
    await client(system, DOCUMENT_STORE).request(
        DeleteDocuments(user=U, collection=collection, document_ids=[d.id for d in DOCS])
    )


@pytest.mark.parametrize("kill", KILL_POINTS, ids=[f"{s}.{m}" for s, m in KILL_POINTS])
async def test_a_write_stopped_at_any_point_is_completed_by_a_rerun(
    system: System, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kill: tuple[str, str]
) -> None:
    home = tmp_path / "home"
    await load(system, "clean")
    clean = await state(system, home, "clean")
    assert clean["documents"] == 4 and not clean["unlabelled"] and clean["owned"] and not clean["labelled_twice"]

    store = getattr(system.stores, kill[0])
    real = getattr(store, kill[1])

    async def killed(tenant: Tenant, *args: Any, **kw: Any) -> Any:
        if tenant.collection == "killed":
            raise RuntimeError("killed here")
        return await real(tenant, *args, **kw)

    monkeypatch.setattr(store, kill[1], killed)
    first = await load(system, "killed")
    assert first.loaded == 0 and len(first.failed) == 4
    rag = client(system, GRAPH_RAG)
    asked = await rag.request(GraphRagRequest(user=U, collection="killed", query="Who met Babbage?", no_llm=True))
    lazy = await client(system, LAZY_RAG).request(LazyRagRequest(user=U, collection="killed", query="Babbage?",
                                                                  no_llm=True))  # fmt: skip
    kg = await client(system, KG_QUERY).request(KgQueryRequest(user=U, collection="killed", query="Babbage?",
                                                              no_llm=True))  # fmt: skip
    warned_while_killed = [w.type for r in (asked, lazy, kg) for w in r.warnings]
    monkeypatch.setattr(store, kill[1], real)

    again = await load(system, "killed")
    assert again.loaded == 4 and not again.failed
    assert await state(system, home, "killed") == clean
    asked = await rag.request(GraphRagRequest(user=U, collection="killed", query="Who met Babbage?", no_llm=True))
    assert warned_while_killed == ["incomplete-collection"] * 3 and not asked.warnings

    await delete_all(system, "clean")
    await delete_all(system, "killed")
    assert await state(system, home, "killed") == await state(system, home, "clean")


async def test_two_loads_that_find_one_new_concept_at_once_label_it_once(system: System, tmp_path: Path) -> None:
    """Each load finds `ada lovelace` new (neither is stored when the other links), with its own
    surface form; the collection keeps one label, whichever write came first."""
    shouting = [
        Document(id=f"x{i}", text=f"ADA LOVELACE wrote note {i} about the Analytical Engine.") for i in range(6)
    ]
    quiet = [Document(id=f"y{i}", text=f"ada lovelace read note {i} in London.") for i in range(6)]
    for n in range(3):
        coll = f"race-{n}"
        done = await asyncio.gather(load(system, coll, shouting), load(system, coll, quiet))
        assert all(not r.failed for r in done)
        got = await state(system, tmp_path / "home", coll)
        assert got["labelled_twice"] == 0 and not got["unlabelled"], got
        ada = await system.stores.triples.pattern(Tenant(U, coll), Term.iri("http://kgflow.org/e/ada_lovelace"),
                                                  Term.iri(RDFS_LABEL), None, 10)  # fmt: skip
        assert len(ada) == 1, ada


async def test_a_load_is_marked_from_its_first_step_until_its_documents_are_stored(
    system: System, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A load that dies before its store request (here: indexing fails) leaves the collection marked
    incomplete; a rerun that stores it, or finds every document stored already, clears the mark."""
    rag = client(system, GRAPH_RAG)

    async def warned(collection: str) -> list[str]:
        res = await rag.request(GraphRagRequest(user=U, collection=collection, query="Babbage?", no_llm=True))
        return [w.type for w in res.warnings]

    await load(system, "stale")  # stored; then a write dies after its last document, before clearing
    await client(system, DOCUMENT_STORE).request(WriteMark(user=U, collection="stale"))
    assert await warned("stale") == ["incomplete-collection"]
    assert (await load(system, "stale")).unchanged == 4
    assert await warned("stale") == []

    real_run = Offload.run

    async def fails(self: Offload, what: str, fn: Any, *args: Any) -> Any:  # in a thread or a worker process
        if what == "indexing documents":
            raise RuntimeError("killed while indexing")
        return await real_run(self, what, fn, *args)

    monkeypatch.setattr(Offload, "run", fails)
    with pytest.raises(RemoteError):
        await load(system, "early")
    assert await warned("early") == ["incomplete-collection"]
    monkeypatch.undo()
    assert (await load(system, "early")).loaded == 4
    assert await warned("early") == []


async def test_a_write_begun_before_a_delete_does_not_bring_the_documents_back(
    system: System, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A killed load's store request, redelivered after the user deleted its documents, stores
    nothing of them; after a delete of the whole collection it is refused whole, and leaves the
    collection as the delete left it. A load begun after the delete stores them again."""
    store = client(system, DOCUMENT_STORE)
    sent: list[StoreDocuments] = []
    real_store = BusIngest.store

    async def recording(self: BusIngest, documents: list[IndexedDocument]) -> list[str]:
        sent.append(StoreDocuments(user=U, collection="gone", documents=documents, started=self.started,
                                   stamp=self.stamp))  # fmt: skip
        return await real_store(self, documents)

    monkeypatch.setattr(BusIngest, "store", recording)
    await load(system, "gone", DOCS[:2])
    (old,) = sent  # the load's one store request, as a redelivery would bring it again
    await delete_all(system, "gone")
    clean_after_delete = await state(system, tmp_path / "home", "gone")
    res = await store.request(old)
    assert res.stored == 0 and res.withdrawn == ["a", "b"]
    assert await state(system, tmp_path / "home", "gone") == clean_after_delete
    assert (await load(system, "gone", DOCS[:2])).loaded == 2  # begun after the delete
    await store.request(DeleteCollection(user=U, collection="gone"))
    clean_after_delete = await state(system, tmp_path / "home", "gone")
    with pytest.raises(RemoteError) as refused:
        await store.request(sent[-1])
    assert refused.value.type == COLLECTION_DELETED
    assert await state(system, tmp_path / "home", "gone") == clean_after_delete
    with pytest.raises(RemoteError):  # nor may it mark the collection as being loaded
        await store.request(WriteMark(user=U, collection="gone", stamp=sent[-1].stamp))


async def test_a_load_asked_for_before_a_delete_and_served_after_it_stores_nothing_deleted(system: System) -> None:
    """A killed client's load request, redelivered and served only after the user deleted its
    documents, carries the stamp its load began with: it names what it did not store. The same
    load asked for after the delete stores them."""
    assert (await load(system, "again", DOCS[:2])).loaded == 2
    stamp = (await client(system, DOCUMENTS).request(DocumentStatus(user=U, collection="again",
                                                                    document_ids=["a"]))).stamp  # fmt: skip
    await delete_all(system, "again")
    late = await client(system, DOCUMENT_LOAD).request(LoadDocuments(user=U, collection="again", documents=DOCS[:2],
                                                                     stamp=stamp))  # fmt: skip
    assert late.loaded == 0 and sorted(f.id for f in late.failed) == ["a", "b"]
    assert all("deleted after this load began" in f.error for f in late.failed)
    assert (await load(system, "again", DOCS[:2])).loaded == 2
