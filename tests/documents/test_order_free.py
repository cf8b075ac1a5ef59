"""Order-free entity resolution: one set of documents gives one graph, the same concepts and
labels, whether loaded in order, reversed or by four concurrent writers, and a delete leaves the
graph the remaining documents give (issue 42, item 4). A concept's label is its most frequent
spelling (a rare ALL CAPS one does not win), ties going to the least; the corpus also names one
club by two of its names, the label of one being the other's key. Here on the embedded stores; on
Neo4j in tests/integration/test_order_free_neo4j.py."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from pathlib import Path

from processors.base.client import RequestResponseClient
from processors.base.settings import RuntimeSettings
from processors.commands.system import embedded
from processors.ingest.documents.pipeline import index_document
from processors.stores.settings import StoreSettings
from schemas.documents import Chunk, DeleteCollection, DeleteDocuments, Document, IndexedDocument, StoreDocuments
from schemas.extraction import ConceptMention
from schemas.services import DOCUMENT_STORE
from schemas.tenant import Tenant
from schemas.terms import RDFS_LABEL, Term

C = "order-free"


def spellings(n: int) -> list[tuple[str, str]]:
    """Document n's spellings: "Chief" 18 times in 30, "chief" 9, "CHIEF" 3; "River" and "river"
    15 each; "bell" 25, "BELL" 5."""
    chief = "CHIEF" if n % 10 == 0 else "chief" if n % 3 == 1 else "Chief"
    return [("chief", chief), ("river", "River" if n % 2 else "river"), ("bell", "BELL" if n % 7 == 0 else "bell")]


def corpus() -> list[IndexedDocument]:
    """Thirty documents, each spelling the shared concepts its own way."""
    out = []
    for n in range(30):
        found = [ConceptMention(key=k, label=label) for k, label in spellings(n)]
        if n % 3 == 0:  # the club by one name, spelt as its other name: that name's key labels it
            found.append(ConceptMention(key="seattle fc", label="Seattle Sounders FC"))
        elif n % 3 == 1:
            found.append(ConceptMention(key="seattle sounders fc", label="Seattle Sounders FC"))
        text = " ".join(m.label for m in found)
        doc = Document(id=f"d{n:02}", title="", text=text)
        chunk = Chunk(id=f"c{n:02}", document_id=doc.id, text=text, end=len(text), tokens=len(found))
        out.append(index_document(doc, [chunk], [[1.0] + [0.0] * 383], [found]))
    return out


async def graph(
    settings: StoreSettings, batches: list[list[IndexedDocument]], delete: Sequence[str] = ()
) -> dict[str, str]:
    """Load the batches at once (one writer each, a document per request) into a new collection,
    delete the documents `delete`, and return its graph's labels (IRI -> label); the entity index
    holds each concept by its label."""
    user = f"order-{uuid.uuid4().hex[:8]}"
    async with embedded(settings, RuntimeSettings()) as system:
        client = RequestResponseClient.for_service(system.bus, DOCUMENT_STORE, "default", 120)

        async def write(batch: list[IndexedDocument]) -> None:
            for doc in batch:
                await client.request(StoreDocuments(user=user, collection=C, documents=[doc]))

        try:
            await asyncio.gather(*(write(b) for b in batches))
            if delete:
                await client.request(DeleteDocuments(user=user, collection=C, document_ids=list(delete)))
            tenant = Tenant(user, C)
            rows = await system.stores.triples.pattern(tenant, None, Term.iri(RDFS_LABEL), None, 1000)
            labels = {t.s.value: t.o.value for t in rows}
            assert len(labels) == len(rows)  # one label an IRI
            for iri, label in ((i, x) for i, x in labels.items() if "/e/" in i):
                hits = await system.stores.entities.search(tenant, None, label, 20)
                assert (iri, label) in {(h.iri, h.label) for h in hits}  # the index agrees
            return labels
        finally:
            await client.request(DeleteCollection(user=user, collection=C))


def concepts(labels: dict[str, str]) -> dict[str, str]:
    """The concepts of a graph's labels: key part of the IRI -> label."""
    return {iri.rsplit("/", 1)[1]: label for iri, label in labels.items() if "/e/" in iri}


async def same_graph_whatever_the_order(settings: StoreSettings) -> None:
    """In order, reversed and by four concurrent writers: every concept and label the same, each
    the most frequent spelling; deleting the "Chief" documents leaves the graph of the others."""
    docs = corpus()
    in_order = await graph(settings, [docs])
    assert in_order == await graph(settings, [docs[::-1]])
    assert in_order == await graph(settings, [docs[i::4] for i in range(4)])
    club = "Seattle Sounders FC"
    assert concepts(in_order) == {"chief": "Chief", "river": "River", "bell": "bell",
                                  "seattle_fc": club, "seattle_sounders_fc": club}  # fmt: skip
    chiefs = [d.document.id for n, d in enumerate(docs) if spellings(n)[0][1] == "Chief"]
    rest = [d for d in docs if d.document.id not in chiefs]
    after_delete = await graph(settings, [docs[i::4] for i in range(4)], delete=chiefs)
    assert after_delete == await graph(settings, [rest[::-1]])
    assert concepts(after_delete)["chief"] == "chief"  # 9 against CHIEF's 3


async def test_one_corpus_gives_one_graph_whatever_the_order(tmp_path: Path) -> None:
    await same_graph_whatever_the_order(StoreSettings(home=tmp_path / "home"))
