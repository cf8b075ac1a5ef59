"""No question reads a whole collection (the real Neo4j): over a collection whose chunk vectors
alone are several times a memory budget, lazy-rag, kg-query (every mode) and DRIFT answer while
the Python memory the process allocates (tracemalloc's peak) stays under the budget; a document
written between two questions is found by the second, with no re-read of the collection (the
same budget holds)."""

from __future__ import annotations

import tracemalloc
import uuid
from pathlib import Path

import numpy as np

from processors.base.client import RequestResponseClient
from processors.base.settings import RuntimeSettings
from processors.commands.system import System, embedded
from processors.models.embeddings.model import OnnxMiniLM
from processors.stores.documents_protocol import DocumentRecord
from processors.stores.settings import StoreSettings
from schemas.documents import Chunk, Document, DocumentsResponse, IndexedDocument, StoreDocuments
from schemas.drift import DriftRequest
from schemas.kg_query import KgQueryRequest
from schemas.lazy_rag import LazyRagRequest
from schemas.services import DOCUMENT_STORE, DRIFT, KG_QUERY, LAZY_RAG
from schemas.tenant import Tenant
from tests.conftest import Servers

CHUNKS = 12_000  # 12k x 384 float32 vectors: 18 MB, and Neo4j returns them as float64 lists
BUDGET = 5 << 20  # a question may allocate at most 5 MB (under a third of the vectors alone)
WORDS = "river mountain album study capital bridge museum music harbour valley castle garden".split()


def filler(rng: np.random.Generator, start: int, n: int, dim: int) -> list[DocumentRecord]:
    """`n` one-chunk documents of random words and random unit vectors (no concepts)."""
    out = []
    vecs = rng.normal(size=(n, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    for i in range(start, start + n):
        text = " ".join(rng.choice(WORDS, 12)) + f" item{i}"
        doc = Document(id=f"f{i}", title="", text=text)
        chunk = Chunk(id=f"f{i}:0", document_id=doc.id, ordinal=0, text=text, start=0, end=len(text), tokens=13)
        out.append(DocumentRecord(doc, f"h{i}", [chunk], [vecs[i - start].tolist()]))
    return out


async def peak_of(system: System, requests: list[tuple[object, object]]) -> int:
    """tracemalloc's peak (bytes above the start) over answering `requests` (service, request)."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    base, _ = tracemalloc.get_traced_memory()
    try:
        for service, req in requests:
            res = await RequestResponseClient.for_service(system.bus, service, "default", 120).request(req)
            assert res.error is None
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def asks(user: str, coll: str) -> list[tuple[object, object]]:
    """lazy-rag, kg-query in every mode and DRIFT, without a model."""
    question = "Which museum stands by the river harbour?"
    return [
        (LAZY_RAG, LazyRagRequest(user=user, collection=coll, query=question, operation="expand")),
        *((KG_QUERY, KgQueryRequest(user=user, collection=coll, query=question, mode=m, no_llm=True))
          for m in ("local", "global", "hybrid", "mix", "naive")),
        (DRIFT, DriftRequest(user=user, collection=coll, query=question, no_llm=True, streaming=False)),
    ]  # fmt: skip


async def test_questions_stay_within_a_memory_budget_and_see_a_new_document_at_once(
    servers: Servers, tmp_path: Path
) -> None:
    user, coll = f"bounded-{uuid.uuid4().hex[:8]}", "big"
    settings = StoreSettings(home=tmp_path / "home", documents_backend="neo4j", vectors_backend="neo4j",
                             triples_backend="neo4j", neo4j_url=servers.neo4j_url)  # fmt: skip
    model = OnnxMiniLM.shared()
    async with embedded(settings, RuntimeSettings()) as system:
        try:
            rng = np.random.default_rng(5)
            for start in range(0, CHUNKS, 2000):
                await system.stores.documents.store(Tenant(user, coll), filler(rng, start, 2000, model.dimensions))
            assert CHUNKS * model.dimensions * 4 > 3 * BUDGET
            await system.stores.documents.store(Tenant(user, "small"), filler(rng, CHUNKS, 50, model.dimensions))
            await peak_of(system, asks(user, "small"))  # warm the model, the driver and the flows elsewhere
            assert await peak_of(system, asks(user, coll)) < BUDGET  # the first questions over the collection

            text = "The zeppelin hangar at Friedrichshafen stands by the lake."
            (vec,) = await model.embed([text])
            new = IndexedDocument(
                document=Document(id="zeppelin", title="Zeppelin hangar", text=text), content_hash="z",
                chunks=[Chunk(id="zeppelin:0", document_id="zeppelin", ordinal=0, text=text, start=0,
                              end=len(text), tokens=12)], vectors=[vec])  # fmt: skip
            stored = RequestResponseClient.for_service(system.bus, DOCUMENT_STORE, "default", 120)
            res: DocumentsResponse = await stored.request(StoreDocuments(user=user, collection=coll, documents=[new]))
            assert res.stored == 1
            ask = LazyRagRequest(user=user, collection=coll, query="Where is the zeppelin hangar?", operation="expand")
            lazy = RequestResponseClient.for_service(system.bus, LAZY_RAG, "default", 120)
            tracemalloc.start()
            try:
                found = await lazy.request(ask)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            assert found.documents[0].id == "zeppelin" and peak < BUDGET
        finally:
            for c in (coll, "small"):
                await system.stores.documents.delete_collection(Tenant(user, c))
                await system.stores.communities.delete_collection(Tenant(user, c))
                await system.stores.triples.delete_collection(Tenant(user, c))
                await system.stores.entities.delete_collection(Tenant(user, c))
