"""The reads one chunk search makes (candidates, named concepts, hops, chunks), or the levels of
an expansion's links, as one unit: a document store runs them through `read_as_one`, which on a
server sends them all in one read transaction (issue 38: a question in few store round trips) and on an embedded store
runs each as it comes (its reads are local calls, not round trips)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar, cast

from processors.algorithms.passage_rank import Candidates, HopLinks, Passage
from schemas.documents import Chunk, Mention
from schemas.tenant import Tenant

T = TypeVar("T")


@dataclass(frozen=True)
class ChunkQuery:
    """What a question's chunk reads carry: the tenant (with the request's narrower scope) and
    the question's vector (None: no dense side)."""

    tenant: Tenant
    vector: Sequence[float] | None = None


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


class DirectReads:
    """`read_as_one` for a store whose reads need no transaction around them: each runs as it comes."""

    async def read_as_one(self, work: Callable[[ChunkReads], Awaitable[T]]) -> T:
        """`work` over this store's own reads."""
        return await work(cast("ChunkReads", self))  # the store's class implements ChunkReads
