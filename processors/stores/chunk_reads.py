"""The reads one chunk search makes (candidates, named concepts, hops, chunks), or the levels of
an expansion's links, as one unit: a document store runs them through `read_as_one`, which on a
server sends them all in one read transaction (issue 38: a question in few store round trips) and on an embedded store
runs each as it comes (its reads are local calls, not round trips)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar, cast

from processors.algorithms.passage_rank import Candidates, HopLinks, Passage
from processors.stores.protocol import EntityHit, LoadState
from schemas.communities import CommunityInfo
from schemas.documents import Chunk, Mention
from schemas.tenant import Tenant

T = TypeVar("T")


@dataclass(frozen=True)
class ChunkQuery:
    """What a question's chunk reads carry: the tenant (with the request's narrower scope) and
    the question's vector (None: no dense side)."""

    tenant: Tenant
    vector: Sequence[float] | None = None


@dataclass(frozen=True)
class RelationHit:
    """A relation a store read found: its ends and predicate, how many chunks support it, and
    its cosine to the question (None: not found by vector)."""

    s: str
    p: str
    o: str
    support: int
    score: float | None = None


class ChunkReads(Protocol):
    """The reads of a chunk search (each as `DocumentStore` documents it)."""

    async def candidates(
        self, q: ChunkQuery, terms: Sequence[str], k: int, among: Sequence[str] | None = None,
        phrases: Sequence[str] = (),
    ) -> Candidates:  # fmt: skip
        """The nearest and the best-BM25 chunks, with the concepts `phrases` name."""
        ...

    async def candidates_many(
        self, tenant: Tenant, questions: Sequence[tuple[Sequence[float] | None, Sequence[str]]], k: int
    ) -> list[Candidates]:
        """`candidates` for each (question vector, terms)."""
        ...

    async def named(self, q: ChunkQuery, phrases: Sequence[str]) -> dict[str, tuple[str, list[Passage]]]:
        """Of `phrases`, the concept keys with a chunk in the scope."""
        ...

    async def passage_links(
        self, q: ChunkQuery, chunk_ids: Sequence[str], skip: Collection[str], cap: int, known: Collection[str]
    ) -> HopLinks:
        """One graphrank hop from `chunk_ids`."""
        ...

    async def links(
        self, q: ChunkQuery, entities: Sequence[str], chunk_ids: Sequence[str], per_entity: int
    ) -> list[Mention]:
        """The chunk-entity links of a neighbourhood (one level of an expansion)."""
        ...

    async def chunks(self, tenant: Tenant, ids: Sequence[str]) -> list[Chunk]:
        """Chunks by id (in the scope), in the order asked."""
        ...

    def entity_reads(self) -> EntityReads | None:
        """The seed entities' reads in the same unit, when this store holds the collection's
        entities too (None: they are read from their own stores)."""
        ...

    def context_reads(self) -> ContextReads | None:
        """The context's reads in the same unit, when this store holds the collection's
        communities and labels too (None: they are read from their own stores)."""
        ...


class EntityReads(Protocol):
    """The reads a question's seed entities take (graph-embeddings' search), over the stores of
    the collection's entities (each as `EntityIndex`, `TripleStore` and `DocumentStore` document
    it); a document store that holds those too offers them inside its `read_as_one`."""

    async def entity_search(
        self, tenant: Tenant, vector: Sequence[float] | None, text: str | None, limit: int
    ) -> list[EntityHit]:
        """Entities whose whole label the text names, then the nearest by vector."""
        ...

    async def concept_keys(self, tenant: Tenant, keys: Sequence[str]) -> dict[str, list[str]]:
        """Key -> the concepts it is a key or an alias of."""
        ...

    async def labels(self, tenant: Tenant, iris: Sequence[str]) -> dict[str, str]:
        """Labels of entities."""
        ...

    async def load_state(self, tenant: Tenant) -> LoadState | None:
        """The collection's load state (None: no load recorded)."""
        ...


class ContextReads(Protocol):
    """The reads of a neighbourhood's context: the relations among its entities and their
    communities (each as `DocumentStore`, `CommunityStore` and `TripleStore` document it)."""

    async def relations(self, tenant: Tenant, entities: Sequence[str], limit: int) -> list[RelationHit]:
        """Relations among `entities` with a source chunk in scope, strongest first."""
        ...

    async def of_entities(self, tenant: Tenant, entities: Sequence[str], level: int) -> dict[str, str]:
        """Entity -> its community at `level`."""
        ...

    async def communities(self, tenant: Tenant, ids: Sequence[str]) -> list[CommunityInfo]:
        """These communities (with a chunk in scope), largest first."""
        ...

    async def labels(self, tenant: Tenant, iris: Sequence[str]) -> dict[str, str]:
        """Labels of entities."""
        ...


class DirectReads:
    """`read_as_one` for a store whose reads need no transaction around them: each runs as it comes."""

    async def read_as_one(self, work: Callable[[ChunkReads], Awaitable[T]]) -> T:
        """`work` over this store's own reads."""
        return await work(cast("ChunkReads", self))  # the store's class implements ChunkReads

    def entity_reads(self) -> EntityReads | None:
        """None: an embedded store's entities are in their own stores (local calls, no round trips)."""
        return None

    def context_reads(self) -> ContextReads | None:
        """None: an embedded store's communities and labels are in their own stores."""
        return None
