"""A Neo4j document store's search reads over one read transaction (`Neo4jDocumentStore.read_as_one`):
a graphrank search's candidates, hops and chunks, a follow-up round's candidates and chunks, or
the levels of an expansion's links are one round trip instead of one each (issue 38). Each read
is the same Cypher the store's own method runs, so a search reads the same rows either way."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from processors.algorithms.passage_rank import Candidates, HopLinks, Passage
from processors.stores.chunk_reads import EntityReads
from processors.stores.documents_protocol import ChunkQuery
from processors.stores.neo4j import passages
from processors.stores.neo4j.chunk_search import GET_CHUNKS, chunk_of
from processors.stores.neo4j.entity_search import TxEntityReads
from processors.stores.neo4j.mention_links import mention_links
from processors.stores.neo4j.one_read import candidates_read, one_read
from processors.stores.neo4j.schema import Runner
from processors.stores.neo4j.scope import keys, tenant_params
from schemas.documents import Chunk, Mention
from schemas.tenant import Tenant


class TxReads:
    """chunk_reads.ChunkReads over the statements of one read transaction (`run`)."""

    def __init__(self, run: Runner, holds_entities: bool) -> None:
        self.run = run
        self.holds_entities = holds_entities

    def entity_reads(self) -> EntityReads | None:
        """The seed entities' reads in this transaction, when the entity index and the triples
        are on this Neo4j database too."""
        return TxEntityReads(self.run) if self.holds_entities else None

    async def candidates(
        self, q: ChunkQuery, terms: Sequence[str], k: int, among: Sequence[str] | None = None,
        phrases: Sequence[str] = (),
    ) -> Candidates:  # fmt: skip
        """See DocumentStore.candidates: over the whole collection one statement (one_read.py),
        over a scope or `among` one per read (passages.py)."""
        if one_read(q.tenant, q.vector, among):
            (found,) = await candidates_read(self.run, q.tenant, [(q.vector, terms, phrases)], k)
            return found
        found = await passages.candidates(self.run, q.tenant, q.vector, terms, k, among)
        if phrases:
            found.named = await passages.named(self.run, q.tenant, phrases, question_vector(q))
        return found

    async def candidates_many(
        self, tenant: Tenant, questions: Sequence[tuple[Sequence[float] | None, Sequence[str]]], k: int
    ) -> list[Candidates]:
        """See DocumentStore.candidates_many: over the whole collection one statement."""
        if all(one_read(tenant, v, None) for v, _ in questions):
            return await candidates_read(self.run, tenant, [(v, terms, ()) for v, terms in questions], k)
        return [await passages.candidates(self.run, tenant, v, terms, k, None) for v, terms in questions]

    async def named(self, q: ChunkQuery, phrases: Sequence[str]) -> dict[str, tuple[str, list[Passage]]]:
        """See DocumentStore.named."""
        return await passages.named(self.run, q.tenant, phrases, question_vector(q))

    async def passage_links(
        self, q: ChunkQuery, chunk_ids: Sequence[str], skip: Collection[str], cap: int, known: Collection[str]
    ) -> HopLinks:
        """One graphrank hop from `chunk_ids` (see passages.links)."""
        return await passages.links(self.run, q.tenant, chunk_ids, skip, cap, known, question_vector(q))

    async def links(
        self, q: ChunkQuery, entities: Sequence[str], chunk_ids: Sequence[str], per_entity: int
    ) -> list[Mention]:
        """See DocumentStore.links."""
        return await mention_links(self.run, q.tenant, entities, chunk_ids, per_entity)

    async def chunks(self, tenant: Tenant, ids: Sequence[str]) -> list[Chunk]:
        """Chunks by id (in the scope), in the order asked."""
        if not ids:
            return []
        params = {**tenant_params(tenant), "ckeys": keys(tenant, ids)}
        by_id = {r["id"]: chunk_of(r) for r in await self.run(GET_CHUNKS, params)}
        return [by_id[i] for i in dict.fromkeys(ids) if i in by_id]


def question_vector(q: ChunkQuery) -> Sequence[float]:
    """The question's vector, for a read that ranks by it."""
    if q.vector is None:
        raise ValueError("this read ranks by the question's vector and none was given")
    return q.vector
