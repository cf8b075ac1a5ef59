"""Writers of one collection at once (several document-store instances, or one serving several
loads): two that create the same concept leave it one label, and a writer that dies after creating
a concept leaves it indexing's (it goes with the last document that mentions it), through the
real document-store on the embedded stores."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from processors.algorithms.iris import concept_iri
from processors.base.client import RequestResponseClient
from processors.base.settings import RuntimeSettings
from processors.commands.system import System, embedded
from processors.ingest.documents.pipeline import index_document
from processors.stores.settings import StoreSettings
from schemas.documents import Chunk, DeleteDocuments, Document, IndexedDocument, StoreDocuments
from schemas.extraction import ConceptMention
from schemas.services import DOCUMENT_STORE
from schemas.tenant import Tenant
from schemas.terms import RDFS_LABEL, Term

U, C = "writers", "race"
CHURCH = concept_iri("church")


@pytest.fixture
async def system(tmp_path: Path) -> AsyncIterator[System]:
    async with embedded(StoreSettings(home=tmp_path / "home"), RuntimeSettings()) as s:
        yield s


def indexed(doc_id: str, text: str, spelling: str) -> IndexedDocument:
    """A one-chunk document mentioning `church` (spelt `spelling`) and `bell`."""
    doc = Document(id=doc_id, title="", text=text)
    chunk = Chunk(id=f"c-{doc_id}", document_id=doc_id, text=text, end=len(text), tokens=8)
    found = [ConceptMention(key="church", label=spelling), ConceptMention(key="bell", label="bell")]
    return index_document(doc, [chunk], [[1.0] + [0.0] * 383], [found])


async def store(system: System, *docs: IndexedDocument) -> Any:
    client = RequestResponseClient.for_service(system.bus, DOCUMENT_STORE, "default", 60)
    return await client.request(StoreDocuments(user=U, collection=C, documents=list(docs)))


async def test_two_writers_creating_one_concept_leave_it_one_label(system: System) -> None:
    # Both find `church` missing before either writes it (each request reads first), so both create it.
    await asyncio.gather(
        store(system, indexed("a", "The church has a bell.", "church")),
        store(system, indexed("b", "Church bells ring.", "Church")),
    )
    stores = system.stores
    labels = await stores.triples.pattern(Tenant(U, C), Term.iri(CHURCH), Term.iri(RDFS_LABEL), None, 10)
    assert len(labels) == 1 and labels[0].o.value in ("church", "Church")
    hits = await stores.entities.search(Tenant(U, C), None, "church", 5)
    assert [(h.iri, h.label) for h in hits if h.iri == CHURCH] == [(CHURCH, labels[0].o.value)]  # the index agrees


async def test_a_concept_whose_writer_died_is_still_indexings(system: System) -> None:
    stores = system.stores
    real_store, failed = stores.documents.store, []

    async def dies_once(*args: Any) -> Any:  # the writer dies after creating the concepts
        if not failed:
            failed.append(True)
            raise ConnectionError("writer lost")
        return await real_store(*args)

    stores.documents.store = dies_once  # type: ignore[method-assign]
    await store(system, indexed("a", "The church has a bell.", "church"))  # redelivered, then stored
    assert failed and await stores.documents.hashes(Tenant(U, C), ["a"])
    assert await stores.triples.labels(Tenant(U, C), [CHURCH]) == {CHURCH: "church"}

    client = RequestResponseClient.for_service(system.bus, DOCUMENT_STORE, "default", 60)
    await client.request(DeleteDocuments(user=U, collection=C, document_ids=["a"]))
    assert await stores.triples.labels(Tenant(U, C), [CHURCH]) == {}  # it went with its last document
    assert not [h for h in await stores.entities.search(Tenant(U, C), None, "church", 5) if h.iri == CHURCH]
