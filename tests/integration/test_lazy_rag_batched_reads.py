"""The batched reads that bring a lazy-rag question to 4 Neo4j round trips (issue 38) read exactly
what the separate calls they replace read, on the real Neo4j and on SQLite: a search with its seed
entities (documents) against the search and graph-embeddings' seeds, an expansion's levels in one
call against one call a level, a neighbourhood's context (communities service) against the
relations, the communities and the labels asked apart. On Neo4j each batched call is one round trip."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from processors.accounting.usage import counting
from processors.algorithms.expansion import next_entities
from processors.base.settings import RuntimeSettings
from processors.commands.system import System, embedded
from processors.models.embeddings.model import OnnxMiniLM
from processors.stores.settings import StoreSettings
from schemas.communities import BuildCommunities, CommunitiesOf
from schemas.documents import ChunkSearch, DeleteCollection, EntityChunks, EntityRelations, Mention
from schemas.graph_embeddings import GraphEmbeddingsRequest
from schemas.labels import LabelRequest
from schemas.services import COMMUNITIES, COMMUNITY_BUILD, DOCUMENT_STORE, DOCUMENTS, GRAPH_EMBEDDINGS, LABEL_RESOLVER
from tests.conftest import Servers
from tests.documents.scope_property import CORPUS, client, load

pytestmark = pytest.mark.usefixtures("servers")
QUESTIONS = ["Which river flows through the city where Pierre Curie was born?", "Where did Marie Curie teach?"]


@pytest.fixture(params=["sqlite", "neo4j"])
async def loaded(
    request: pytest.FixtureRequest, tmp_path: Path, servers: Servers
) -> AsyncIterator[tuple[System, str, str]]:
    """A system on one backend with the shared corpus loaded and its communities built."""
    home, user = tmp_path / "home", f"batched-{uuid.uuid4().hex[:8]}"
    store = servers.all_on_neo4j(home) if request.param == "neo4j" else StoreSettings(home=home)
    async with embedded(store, RuntimeSettings()) as system:
        try:
            await load(system, user, "c", CORPUS)
            built = await client(system, COMMUNITY_BUILD).request(BuildCommunities(user=user, collection="c"))
            assert built.levels.get(0, 0) > 0
            yield system, request.param, user
        finally:
            await client(system, DOCUMENT_STORE).request(DeleteCollection(user=user, collection="c"))


async def test_a_search_with_its_seeds_reads_what_the_two_calls_read(loaded: tuple[System, str, str]) -> None:
    system, backend, user = loaded
    for question in [*QUESTIONS, "Who was born near the capital of Poland?"]:
        vector = (await OnnxMiniLM.shared().embed([question]))[0]
        search = ChunkSearch(user=user, collection="c", vector=vector, text=question, mode="graph", limit=30)
        apart = await client(system, DOCUMENTS).request(search)
        asked = GraphEmbeddingsRequest(user=user, collection="c", vector=vector, text=question, limit=10)
        seeds = await client(system, GRAPH_EMBEDDINGS).request(asked)
        with counting() as usage:
            both = await client(system, DOCUMENTS).request(search.model_copy(update={"seed_entities": 10}))
        assert [(c.id, c.score) for c in both.chunks] == [(c.id, c.score) for c in apart.chunks] and both.chunks
        assert both.seeds == seeds.entities and both.seeds and both.warnings == seeds.warnings
        if backend == "neo4j":
            assert usage.round_trips == 1, usage


async def test_an_unknown_collection_says_so_beside_its_search(loaded: tuple[System, str, str]) -> None:
    system, _, user = loaded
    vector = (await OnnxMiniLM.shared().embed(["Paris"]))[0]
    search = ChunkSearch(
        user=user, collection="nothing-here", vector=vector, text="Paris", mode="graph", seed_entities=5
    )
    res = await client(system, DOCUMENTS).request(search)
    assert not res.chunks and not res.seeds and [w.type for w in res.warnings] == ["unknown-collection"]


async def test_the_levels_of_an_expansion_in_one_call_read_what_a_call_a_level_reads(
    loaded: tuple[System, str, str],
) -> None:
    system, backend, user = loaded
    docs = client(system, DOCUMENTS)
    for question in QUESTIONS:
        vector = (await OnnxMiniLM.shared().embed([question]))[0]
        search = ChunkSearch(user=user, collection="c", vector=vector, text=question, mode="graph", limit=30,
                             seed_entities=10)  # fmt: skip
        found = await docs.request(search)
        ranked, seeds = [c.id for c in found.chunks], [s.entity.value for s in found.seeds]
        for hops, top in ((2, 50), (3, 2)):
            # one call a level, the next level chosen as lazy-rag chose it before
            mentions: list[Mention] = []
            entities, chunks, done, first = seeds, ranked, set[str](), 0
            for _ in range(hops):
                level = EntityChunks(user=user, collection="c", entities=entities, chunk_ids=chunks, per_entity=20)
                got = (await docs.request(level)).links
                read = got.mentions if got else []
                done.update(entities)
                seen = set(ranked) | {m.chunk_id for m in mentions}
                mentions += read
                first = first or len(mentions)
                chunks = sorted({m.chunk_id for m in read} - seen)
                entities = next_entities(mentions, ranked, done, top)
            whole = EntityChunks(user=user, collection="c", entities=seeds, chunk_ids=ranked, per_entity=20,
                                 hops=hops, max_entities=top)  # fmt: skip
            with counting() as usage:
                at_once = (await docs.request(whole)).links
            assert at_once and at_once.mentions == mentions and len(mentions) > first  # the next levels read more
            if backend == "neo4j":
                assert usage.round_trips == 1, usage


async def test_a_context_in_one_call_reads_what_relations_and_communities_read(
    loaded: tuple[System, str, str],
) -> None:
    system, backend, user = loaded
    entities = [f"http://kgflow.org/e/{n}" for n in ("marie_curie", "pierre_curie", "paris", "warsaw", "seine")]
    relations = await client(system, DOCUMENTS).request(EntityRelations(user=user, collection="c", entities=entities))
    of = CommunitiesOf(user=user, collection="c", entities=entities, limit=3)
    communities = await client(system, COMMUNITIES).request(of)
    labels = await client(system, LABEL_RESOLVER).request(LabelRequest(user=user, collection="c", iris=entities))
    with counting() as usage:
        both = await client(system, COMMUNITIES).request(of.model_copy(update={"relations": 100, "labels": True}))
    assert both.relations == relations.relations and both.relations
    assert both.labels == labels.labels and both.labels["http://kgflow.org/e/paris"] == "Paris"
    assert both.communities == communities.communities and both.communities and both.communities[0].top_entity_labels
    assert both.membership == communities.membership
    if backend == "neo4j":
        assert usage.round_trips == 1, usage
