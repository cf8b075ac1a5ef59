"""A delete is final, as one scenario run on each stack (tests/documents/test_delete_during_load.py
on the memory bus and SQLite, tests/integration/test_delete_during_load_servers.py over the real
Pulsar and Neo4j): `kgflow load`'s client code loads documents in small batches; once some are
stored, the collection is deleted while the load still runs. After the load nothing of it is
left (no document, chunk, mention, concept, triple or vector; nothing searchable), the load said
the collection was deleted and refused the rest (it does not say "loaded N"), and a fresh load
works. A document deleted while its own write is under way does not come back either."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

from pydantic import BaseModel

from processors.base.client import RequestResponseClient
from processors.commands.loading import Batching, DocumentsLoaded, Stream, load_documents
from processors.commands.system import System
from schemas.base import Response
from schemas.documents import ChunkSearch, DeleteCollection, DeleteDocuments, Document, ListCollections
from schemas.graph_embeddings import GraphEmbeddingsRequest
from schemas.services import DOCUMENT_LOAD, DOCUMENT_STORE, DOCUMENTS, GRAPH_EMBEDDINGS, Service
from schemas.tenant import Tenant

CITIES = ["Lima", "Quito", "Oslo", "Porto", "Kyoto", "Dakar", "Hanoi", "Perth"]
PEOPLE = ["Ada Lovelace", "Alan Turing", "Grace Hopper", "Marie Curie", "Niels Bohr", "Emmy Noether"]
DOCS = [
    Document(
        id=f"doc-{n:02d}",
        title=f"Report {n}",
        text=f"{PEOPLE[n % 6]} visited {CITIES[n % 8]} in {1900 + n}. The Acme Museum of {CITIES[(n + 3) % 8]} "
        f"hosted {PEOPLE[(n + 1) % 6]} and a lecture on radium number {n}.",
    )
    for n in range(48)
]
BATCH = Batching(documents=6, in_flight=2)
DELETE_AFTER = 12  # documents stored when the collection is deleted: two of eight batches

# What is left of a collection in the store itself (rows or nodes of any kind but deletion marks and
# the record of its last load, checked apart), by table or label (only those with some).
Leftovers = Callable[[str, str], Awaitable[dict[str, int]]]


def client(system: System, service: Service[BaseModel, Response]) -> RequestResponseClient[Response]:
    return RequestResponseClient.for_service(system.bus, service, "default", 300)


def stream(system: System, hold: Callable[[], Awaitable[None]] | None = None) -> Stream:
    """The client side of `kgflow load documents` (loading.Stream) over the system's bus; each
    batch waits for `hold()` before it is sent."""

    async def responses(
        service: Service[BaseModel, Response], req: BaseModel, timeout_s: float
    ) -> AsyncIterator[Response]:
        if hold is not None and service is DOCUMENT_LOAD:
            await hold()
        async for res in RequestResponseClient.for_service(system.bus, service, "default", timeout_s).stream(req):
            yield res

    return responses


async def load_deleting(system: System, user: str, collection: str, delete: BaseModel) -> tuple[DocumentsLoaded, int]:
    """Load DOCS; when DELETE_AFTER documents are done, send `delete`: the batches under way race
    it, the next ones are sent once it is answered (so it always comes while the load runs).
    Returns the load's report and how many documents were done when the delete was answered."""
    done = [0]
    answered: list[int] = []
    sent: list[asyncio.Task[None]] = []

    async def send() -> None:
        await client(system, DOCUMENT_STORE).request(delete)
        answered.append(done[0])

    def progress(stage: str, n: int) -> None:
        if stage == "loaded":
            done[0] += n
            if done[0] >= DELETE_AFTER and not sent:
                sent.append(asyncio.create_task(send()))

    async def hold() -> None:
        if sent:
            await sent[0]

    report = await load_documents(stream(system, hold), user, collection, DOCS, progress=progress, batching=BATCH)
    await sent[0]
    return report, answered[0]


async def check_empty(system: System, user: str, collection: str, leftovers: Leftovers) -> None:
    """Nothing of the collection: not listed, nothing found by text, vector or entity search."""
    listed = (await client(system, DOCUMENTS).request(ListCollections(user=user))).collections
    back = [c for c in listed if c.collection == collection]
    assert back == [], back
    vector = [0.1] * 384
    search = ChunkSearch(user=user, collection=collection, text="Acme Museum radium Lima", vector=vector, limit=50)
    assert (await client(system, DOCUMENTS).request(search)).chunks == []
    entities = GraphEmbeddingsRequest(user=user, collection=collection, vector=vector, text="Ada Lovelace", limit=50)
    assert (await client(system, GRAPH_EMBEDDINGS).request(entities)).entities == []
    left = await leftovers(user, collection)
    assert left == {}, left
    state = await system.stores.triples.load_state(Tenant(user, collection))  # a refused load's, at most
    assert state is None or state.complete, state


async def check_delete_during_load(system: System, user: str, leftovers: Leftovers) -> None:
    """The scenario (see the module docstring) for `user`."""
    collection = "delrace"
    report, when = await load_deleting(system, user, collection, DeleteCollection(user=user, collection=collection))
    await check_empty(system, user, collection, leftovers)
    assert when < len(DOCS), "the delete was answered after the load ended: no race was tested"
    assert report.collection_deleted and not report.complete
    assert report.loaded >= DELETE_AFTER and report.refused  # stored before the delete, and the rest refused
    assert report.loaded + len(report.refused) == len(DOCS) and not report.failed
    assert report.communities is None  # no rebuild of a deleted collection

    again = await load_documents(stream(system), user, collection, DOCS[:6])
    assert again.complete and again.loaded == 6 and not again.collection_deleted
    search = ChunkSearch(user=user, collection=collection, text="Acme Museum", mode="lexical", limit=50)
    found = (await client(system, DOCUMENTS).request(search)).chunks
    assert sorted({c.document_id for c in found}) == [d.id for d in DOCS[:6]]
    await client(system, DOCUMENT_STORE).request(DeleteCollection(user=user, collection=collection))
    await check_empty(system, user, collection, leftovers)


async def check_document_delete_during_load(system: System, user: str) -> None:
    """Documents deleted while the load runs (the last batch's among them, not written yet) are
    not there after it, whichever of their writes was under way; the others are."""
    collection = "docrace"
    late = [d.id for d in DOCS[-6:]]  # the last batch: not sent yet when the delete is answered
    report, when = await load_deleting(system, user, collection, DeleteDocuments(user=user, collection=collection,
                                                                                 document_ids=late))  # fmt: skip
    assert when < len(DOCS) - len(late)
    search = ChunkSearch(user=user, collection=collection, text="Acme Museum", mode="lexical", limit=100)
    found = {c.document_id for c in (await client(system, DOCUMENTS).request(search)).chunks}
    assert found == {d.id for d in DOCS[:-6]}, sorted(found & set(late))
    assert sorted(report.failed) == late and all("deleted after this load began" in e for e in report.failed.values())
    assert not report.collection_deleted and report.loaded == len(DOCS) - len(late)
    again = await load_documents(stream(system), user, collection, DOCS[-6:])  # a new load stores them
    assert again.complete and again.loaded == 6
    await client(system, DOCUMENT_STORE).request(DeleteCollection(user=user, collection=collection))
