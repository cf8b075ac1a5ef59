"""A Neo4j document store's search reads over one read transaction (`Neo4jDocumentStore.read_as_one`):
a graphrank search's candidates, hops and chunks, a follow-up round's candidates and chunks, or
the levels of an expansion's links are one round trip instead of one each (issue 38). Each read
is the same Cypher the store's own method runs, so a search reads the same rows either way."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from processors.algorithms.passage_rank import Candidates, HopLinks, Passage
from processors.stores.chunk_reads import ContextReads, EntityReads, RelationHit
from processors.stores.documents_protocol import ChunkQuery
from processors.stores.neo4j import passages
from processors.stores.neo4j.chunk_search import chunks_read
from processors.stores.neo4j.communities import list_read, of_entities_read
from processors.stores.neo4j.entity_search import TxEntityReads, labels_read
from processors.stores.neo4j.mention_links import mention_links
from processors.stores.neo4j.one_read import candidates_read, one_read
from processors.stores.neo4j.relations import relations_among
from processors.stores.neo4j.schema import Runner
from schemas.communities import CommunityInfo
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

    def context_reads(self) -> ContextReads | None:
        """The context's reads in this transaction, when the triples (the labels) are on this
        Neo4j database too (relations and communities always are)."""
        return TxContextReads(self.run) if self.holds_entities else None

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
        return await chunks_read(self.run, tenant, ids)


class TxContextReads:
    """chunk_reads.ContextReads over the statements of one read transaction (`run`)."""

    def __init__(self, run: Runner) -> None:
        self.run = run

    async def relations(self, tenant: Tenant, entities: Sequence[str], limit: int) -> list[RelationHit]:
        """See DocumentStore.relations."""
        return await relations_among(self.run, tenant, entities, limit)

    async def of_entities(self, tenant: Tenant, entities: Sequence[str], level: int) -> dict[str, str]:
        """See CommunityStore.of_entities."""
        return await of_entities_read(self.run, tenant, entities, level)

    async def communities(self, tenant: Tenant, ids: Sequence[str]) -> list[CommunityInfo]:
        """See CommunityStore.list (by id)."""
        return await list_read(self.run, tenant, None, ids, len(ids))

    async def labels(self, tenant: Tenant, iris: Sequence[str]) -> dict[str, str]:
        """See TripleStore.labels."""
        return await labels_read(self.run, tenant, iris)


def question_vector(q: ChunkQuery) -> Sequence[float]:
    """The question's vector, for a read that ranks by it."""
    if q.vector is None:
        raise ValueError("this read ranks by the question's vector and none was given")
    return q.vector
