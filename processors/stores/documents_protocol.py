"""The document store protocol every document backend (SQLite, Neo4j) implements, and what its
calls share. Every call takes a `Tenant`; its `scope` (a request's narrower scope) is applied
inside the store's queries by the reads that honour one."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from processors.algorithms.passage_rank import Candidates, HopLinks, Passage
from processors.stores.chunk_reads import ChunkQuery, ChunkReads, RelationHit
from processors.stores.community_graph import Change, CommunityGraph, CommunityRecord, Stale
from schemas.communities import CommunityInfo
from schemas.documents import Chunk, Document, DocumentInfo, Mention, Scope
from schemas.tenant import Tenant

T = TypeVar("T")


@dataclass
class Relation:
    """A relation between two entities and the chunks it came from."""

    s: str
    p: str
    o: str
    chunk_ids: list[str]


@dataclass
class DocumentRecord:
    """A document ready to store: its chunks with vectors, and its links to the graph by IRI."""

    document: Document
    content_hash: str
    chunks: list[Chunk]
    vectors: list[list[float]]
    mentions: list[Mention] = field(default_factory=list)
    relations: list[Relation] = field(default_factory=list)
    owned: set[str] = field(default_factory=set)  # entities this document's indexing created
    keys: dict[str, str] = field(default_factory=dict)  # entity -> the concept key it was found by
    aliases: dict[str, list[str]] = field(default_factory=dict)  # entity -> its other keys ("neil peart")
    title_entity: str | None = None  # the document's subject (its title's, or its first sentence's)
    # owned entity -> its spellings in the document, each with its mentions (the store sums them
    # over the collection: a concept's label is its most frequent spelling, linking.spelling_of)
    spellings: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass
class RemovedLinks:
    """What a replaced or deleted document leaves unlinked: relations no chunk supports any more
    (their triples go) and concepts indexing created that no chunk mentions any more (they go)."""

    relations: list[tuple[str, str, str]] = field(default_factory=list)
    concepts: list[str] = field(default_factory=list)
    touched: list[str] = field(default_factory=list)  # every entity the removed documents mentioned


class DeletedSince(Exception):
    """A write refused in its transaction: of its documents, `ids` were deleted after its stamp
    (`COLLECTION`: the whole collection was). Nothing of the write was stored."""

    def __init__(self, ids: set[str]) -> None:
        super().__init__(f"deleted after the write began: {sorted(ids)[:5]}")
        self.ids = ids


COLLECTION = ""  # the deletion mark of a whole collection (no document id is empty)


def tenant_token(tenant: Tenant) -> str:
    """The token a collection's rows carry in a full-text index, matched inside every query (a
    hash: word characters only, no user text in the index)."""
    return "t" + hashlib.sha256(f"{tenant.user}\x1f{tenant.collection}".encode()).hexdigest()[:24]


@dataclass(frozen=True)
class RelationChunk:
    """A source chunk of a relation (s, p, o)."""

    relation: tuple[str, str, str]
    chunk_id: str


@dataclass(frozen=True)
class Episodes:
    """What an episode read found: the entities each chunk mentions, and per entity the number of
    distinct in-scope documents in the window whose chunks mention it."""

    mentioned: dict[str, list[str]]
    counts: dict[str, int]


@dataclass(frozen=True)
class DocumentCounts:
    """What one collection holds in the document store."""

    documents: int
    chunks: int


@dataclass(frozen=True)
class ScopeSql:
    """A scope as query parameters: a JSON array of document ids and a JSON object
    {key: [JSON-encoded values]} (None where the scope does not narrow)."""

    document_ids: str | None
    metadata: str | None


def scope_params(scope: Scope) -> ScopeSql:
    """`scope` as parameters (metadata values JSON-encoded, as stored, so 1 and "1" differ)."""
    ids = json.dumps(scope.document_ids) if scope.document_ids is not None else None
    meta = None
    if scope.metadata:
        meta = json.dumps(
            {k: [json.dumps(x) for x in (v if isinstance(v, list) else [v])] for k, v in scope.metadata.items()}
        )
    return ScopeSql(ids, meta)


class DocumentStore(Protocol):
    """Documents, chunks, mentions and relation provenance of collections."""

    async def store(
        self, tenant: Tenant, records: Sequence[DocumentRecord], stamp: float | None = None
    ) -> RemovedLinks:
        """Write documents, replacing earlier versions of the same ids (one transaction). With a
        `stamp` (`write_stamp` when the load began), the transaction also checks the deletion
        marks, serialised with `note_deleted`, and raises `DeletedSince` (writing nothing) when
        the collection or one of the documents was deleted after it."""
        ...

    async def delete_documents(self, tenant: Tenant, ids: Sequence[str]) -> RemovedLinks:
        """Delete documents and their chunks, mentions and relation provenance."""
        ...

    async def write_stamp(self, tenant: Tenant) -> float:
        """The collection's write stamp: the highest of its deletion marks (0 before any delete).
        A load takes it when it begins and carries it on every write."""
        ...

    async def note_deleted(self, tenant: Tenant, ids: Sequence[str]) -> float:
        """Mark these documents (`COLLECTION`: the whole collection, whose mark replaces the
        documents') deleted with a new stamp, above every stamp issued before, and return it: a
        write of a load begun before (a live client's later batch, a killed load's request
        redelivered) must not bring them back. Call it before deleting the data."""
        ...

    async def deleted_after(self, tenant: Tenant, ids: Sequence[str], stamp: float) -> set[str]:
        """Of `ids`, those deleted after `stamp`, and `COLLECTION` if the collection was."""
        ...

    async def unsupported(self, tenant: Tenant, candidates: RemovedLinks, created: Sequence[str] = ()) -> RemovedLinks:
        """Of what a refused write linked (`candidates`), the relations no chunk is a source of and
        the concepts no chunk mentions that documents own or the write `created` (a collection
        delete may have dropped its claims meanwhile); their claims go. The writer removes them."""
        ...

    async def claim(self, tenant: Tenant, concepts: Mapping[str, str]) -> None:
        """Record that a document write creates these concepts (IRI -> key): owned by documents from
        now on, written before any of their vectors or labels, so a write killed part-way leaves
        them owned and the next write of the collection still knows it must complete them."""
        ...

    async def claimed(self, tenant: Tenant, iris: Sequence[str]) -> set[str]:
        """Of `iris`, the concepts a document write created (owned)."""
        ...

    async def spellings(self, tenant: Tenant, iris: Sequence[str]) -> dict[str, dict[str, int]]:
        """Of `iris`, each concept's spellings with their mentions over the collection's documents
        (what `store` adds and a delete or replace takes away); a concept with none is left out."""
        ...

    async def delete_collection(self, tenant: Tenant) -> None:
        """Drop every document row of the collection (its deletion marks stay: the caller marks the
        collection deleted first, `note_deleted`)."""
        ...

    async def hashes(self, tenant: Tenant, ids: Sequence[str]) -> dict[str, str]:
        """Content hash of each stored document of `ids`."""
        ...

    async def candidates(
        self, q: ChunkQuery, terms: Sequence[str], k: int, among: Sequence[str] | None = None,
        phrases: Sequence[str] = (),
    ) -> Candidates:  # fmt: skip
        """The `k` chunks nearest the question's vector (the store's vector index) and the `k` best
        by BM25 over `terms` (its full-text index), each with its cosine, and the number of chunks
        searched; the scope (and `among`: only those chunks, exactly) inside the queries. With
        `phrases`, also what `named` returns for them, in the same store call."""
        ...

    async def candidates_many(
        self, tenant: Tenant, questions: Sequence[tuple[Sequence[float] | None, Sequence[str]]], k: int
    ) -> list[Candidates]:
        """`candidates` for each (question vector, terms) in the tenant's scope, in one store call
        (a follow-up round's searches)."""
        ...

    async def concept_keys(self, tenant: Tenant, keys: Sequence[str]) -> dict[str, list[str]]:
        """Key -> the concepts it is a key or an alias of (what documents already linked)."""
        ...

    async def named(self, q: ChunkQuery, phrases: Sequence[str]) -> dict[str, tuple[str, list[Passage]]]:
        """Of `phrases`, the concept keys with a chunk in the scope: key -> (concept IRI, the
        chunks whose subject it is, nearest the question first)."""
        ...

    async def passage_links(
        self, q: ChunkQuery, chunk_ids: Sequence[str], skip: Collection[str], cap: int, known: Collection[str]
    ) -> HopLinks:
        """One graphrank hop from `chunk_ids` in one batched read (see algorithms/passage_rank):
        at most `cap` + 1 chunks read per concept (a concept in more may come without its
        subjects: graphrank ranks nothing reached through it)."""
        ...

    async def chunks(self, tenant: Tenant, ids: Sequence[str]) -> list[Chunk]:
        """Chunks by id (in the scope), in the order asked."""
        ...

    async def read_as_one(self, work: Callable[[ChunkReads], Awaitable[T]]) -> T:
        """`work` over this store's search reads (chunk_reads.ChunkReads), on a server all in one
        read transaction: one round trip (retried whole, so `work` must only read and rank)."""
        ...

    async def links(
        self, q: ChunkQuery, entities: Sequence[str], chunk_ids: Sequence[str], per_entity: int
    ) -> list[Mention]:
        """Chunks mentioning `entities` (at most `per_entity` each, most mentions first) and the
        mentions of `chunk_ids`, in one store call."""
        ...

    async def relations(self, tenant: Tenant, entities: Sequence[str], limit: int) -> list[RelationHit]:
        """Relations among `entities` with a source chunk in scope, strongest first."""
        ...

    async def relations_of(self, tenant: Tenant, entities: Sequence[str], per_entity: int) -> list[RelationHit]:
        """Relations with an end among `entities` and a source chunk in scope: each entity's
        `per_entity` most supported as subject and as object, each relation once, support in scope.
        (Relation search scores them by their ends' entity vectors and `relation_contexts`: a
        relation keeps no vector.)"""
        ...

    async def relation_contexts(
        self, tenant: Tenant, relations: Sequence[tuple[str, str, str]], per_relation: int
    ) -> dict[tuple[str, str, str], list[float]]:
        """Each relation's context: the mean vector of its first `per_relation` source chunks (by
        id) in scope; a relation without one is left out."""
        ...

    async def relation_chunks(
        self, q: ChunkQuery, relations: Sequence[tuple[str, str, str]], per_relation: int
    ) -> list[RelationChunk]:
        """The source chunks of `relations` in the scope, at most
        `per_relation` each."""
        ...

    async def episodes(
        self, q: ChunkQuery, entities: Sequence[str], chunk_ids: Sequence[str], window: tuple[float, float] | None
    ) -> Episodes:
        """The entities each of the chunks `chunk_ids` mentions (in scope) and, with a
        window (since, until in epoch seconds), for `entities` and those the chunks mention, the
        distinct documents in scope with a timestamp in it whose chunks mention each (entities
        with none left out) — one store call. Documents without a timestamp are no episodes."""
        ...

    async def chunk_similarities(self, q: ChunkQuery, chunk_ids: Sequence[str]) -> dict[str, float]:
        """Cosine of the question's vector to the stored vector of each chunk of `chunk_ids` in scope."""
        ...

    async def scoped_entities(self, tenant: Tenant) -> set[str]:
        """Entities a chunk in the tenant's (narrowing) scope mentions."""
        ...

    async def scoped_neighbours(
        self, tenant: Tenant, entities: Sequence[str], limit_per_entity: int
    ) -> list[tuple[tuple[str, str, str, int, str, str], str]]:
        """Relation edges touching `entities` with a source chunk in the scope, as (raw edge,
        entity found from): out-edges first, each entity's first `limit_per_entity` in key order."""
        ...

    async def documents(self, tenant: Tenant, limit: int) -> list[DocumentInfo]:
        """Documents of the collection (in the scope) in id order."""
        ...

    async def counts(self, user: str) -> dict[str, DocumentCounts]:
        """Collection -> what it holds, for the user's collections with documents."""
        ...

    async def close(self) -> None:
        """Release resources."""
        ...


class CommunityStore(Protocol):
    """Communities of collections: hierarchy, members, chunks, profile vectors, cached summaries."""

    async def graph(self, tenant: Tenant, entities: Sequence[str] | None = None) -> CommunityGraph:
        """Relation weights and mentions (entity, chunk, count) as arrays: what a build reads; with
        `entities`, the relations between them and their mentions (what an update re-clusters)."""
        ...

    async def replace(self, tenant: Tenant, records: Iterable[CommunityRecord]) -> None:
        """Replace the collection's communities (consuming `records` a page at a time; a record
        without a vector gets the mean of its `vector_chunks`'), keeping summaries whose membership
        is unchanged."""
        ...

    async def mark_stale(self, tenant: Tenant, entities: Sequence[str]) -> None:
        """Flag the communities these entities belong to; those no community holds are pending."""
        ...

    async def stale(self, tenant: Tenant) -> Stale | None:
        """The stale level-0 communities (members, ancestors) and the pending concepts; None when
        the collection has no communities (an update is then a build)."""
        ...

    async def update(self, tenant: Tenant, change: Change) -> None:
        """Apply an update in one transaction: the removed level-0 communities go, the added ones
        come, and their ancestors' members, chunks, profile and membership hash follow."""
        ...

    async def list(
        self,
        tenant: Tenant,
        level: int | None = None,
        ids: Sequence[str] | None = None,
        limit: int = 1000,
    ) -> list[CommunityInfo]:
        """Communities of a level (or all), or by id, largest first, with a chunk in the scope."""
        ...

    async def search(
        self,
        tenant: Tenant,
        vector: Sequence[float],
        level: int | None,
        limit: int,
    ) -> list[CommunityInfo]:
        """Communities nearest `vector`, top level first (see `SearchCommunities`)."""
        ...

    async def of_entities(self, tenant: Tenant, entities: Sequence[str], level: int) -> dict[str, str]:
        """Entity -> its community at `level`."""
        ...

    async def member_chunks(self, tenant: Tenant, ids: Sequence[str]) -> dict[str, list[str]]:
        """Community id -> the ids of its chunks (a parent's are its children's)."""
        ...

    async def membership(self, tenant: Tenant, ids: Sequence[str]) -> dict[str, str]:
        """Community id -> membership hash."""
        ...

    async def set_summary(self, tenant: Tenant, community: str, membership: str, summary: str, model: str) -> None:
        """Cache a summary written for this membership."""
        ...

    async def delete_collection(self, tenant: Tenant) -> None:
        """Drop the collection's communities."""
        ...

    async def close(self) -> None:
        """Release resources."""
        ...
