"""One entity, one node (real spaCy, real model, the embedded flow): "Marie Skłodowska-Curie",
"Marie Curie" and "Maria Skłodowska" in three documents are one concept with three names, and
graph-rag and lazy-rag start from it whichever name (or letter case) a question uses."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from processors.base.client import RequestResponseClient
from processors.base.settings import RuntimeSettings
from processors.commands.system import System, embedded
from processors.stores.documents_protocol import ChunkQuery
from processors.stores.settings import StoreSettings
from schemas.documents import Document, LoadDocuments
from schemas.graph_rag import GraphRagRequest
from schemas.lazy_rag import LazyRagRequest
from schemas.services import DOCUMENT_LOAD, GRAPH_RAG, LAZY_RAG
from schemas.tenant import Tenant

U, C = "alice", "physics"
DOCS = [
    Document(
        id="bio",
        title="",
        text="Marie Skłodowska-Curie (born Maria Skłodowska) was a Polish physicist. "
        "She was born in Warsaw in 1867 and moved to Paris in 1891.",
    ),  # fmt: skip
    Document(id="pierre", title="", text="Pierre Curie married Marie Curie in 1895. Together they studied radium."),
    Document(id="prize", title="Nobel Prize", text="The Nobel Prize in Physics of 1903 went to Marie Curie."),
]
NAMES = ["marie skłodowska curie", "marie curie", "maria skłodowska"]


@pytest.fixture
async def system(tmp_path: Path) -> AsyncIterator[System]:
    async with embedded(StoreSettings(home=tmp_path / "home"), RuntimeSettings()) as s:
        steps = [r async for r in RequestResponseClient.for_service(s.bus, DOCUMENT_LOAD, "default", 120).stream(
            LoadDocuments(user=U, collection=C, documents=DOCS))]  # fmt: skip
        assert steps[-1].loaded == 3 and not steps[-1].failed
        yield s


async def test_the_names_of_one_person_are_one_concept(system: System) -> None:
    found = await system.stores.documents.concept_keys(Tenant(U, C), NAMES)
    assert set(found) == set(NAMES)
    assert len({iri for iris in found.values() for iri in iris}) == 1  # one entity, three names
    (marie,) = found["marie curie"]
    mentioning = {m.chunk_id for m in await system.stores.documents.links(ChunkQuery(Tenant(U, C)), [marie], [], 10)}
    assert len(mentioning) == 3  # every document's chunk mentions the same node


@pytest.mark.parametrize("name", ["Marie Skłodowska-Curie", "Maria Skłodowska", "MARIE CURIE"])
async def test_graph_rag_starts_from_the_entity_whatever_its_name(system: System, name: str) -> None:
    found = await system.stores.documents.concept_keys(Tenant(U, C), ["marie curie"])
    (marie,) = found["marie curie"]
    req = GraphRagRequest(user=U, collection=C, query=f"Where was {name} born?", no_llm=True)
    res = await RequestResponseClient.for_service(system.bus, GRAPH_RAG, "default", 120).request(req)
    seeds = [e.id for e in res.entities if e.lexical]
    assert marie in seeds, (name, [(e.id, e.lexical) for e in res.entities])
    assert any("warsaw" in (t.s_id + t.o_id) for t in res.triples)


async def test_lazy_rag_finds_the_person_by_another_name_and_lists_one_entity(system: System) -> None:
    found = await system.stores.documents.concept_keys(Tenant(U, C), ["marie curie"])
    (marie,) = found["marie curie"]
    req = LazyRagRequest(user=U, collection=C, query="Where was Maria Skłodowska born?", operation="expand")
    res = await RequestResponseClient.for_service(system.bus, LAZY_RAG, "default", 120).request(req)
    assert res.documents[0].id == "bio"
    ids = [e.id for e in res.entities]
    assert marie in ids
    assert not any(i.endswith(("/marie_curie", "/maria_sk%C5%82odowska")) and i != marie for i in ids)
