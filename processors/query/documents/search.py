"""Chunk search over a document store (bus-free): the store searches its own indexes and returns a
bounded set of candidates; this module ranks them — by vector, by BM25, fused by reciprocal rank,
or by graphrank over the neighbourhood the store returns hop by hop (algorithms/passage_rank).
The same code ranks for every backend."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from processors.algorithms.bm25 import terms as bm25_terms
from processors.algorithms.fusion import reciprocal_rank_fusion
from processors.algorithms.passage_rank import (
    Candidates,
    HopLinks,
    Passage,
    PassageRankParams,
    rank_passages,
)
from processors.stores.chunk_reads import ChunkReads
from processors.stores.documents_protocol import ChunkQuery, DocumentStore
from schemas.documents import Chunk, SearchMode
from schemas.tenant import Tenant

FUSION_DEPTH = 4  # each retriever contributes its best `FUSION_DEPTH * limit` to the fusion


@dataclass
class StorePassages:
    """algorithms/passage_rank.PassageSource over a document store's reads, for one question."""

    store: ChunkReads
    q: ChunkQuery

    async def candidates(self, terms: Sequence[str], k: int, phrases: Sequence[str] = ()) -> Candidates:
        return await self.store.candidates(self.q, terms, k, phrases=phrases)

    async def named(self, phrases: Sequence[str]) -> dict[str, tuple[str, list[Passage]]]:
        return await self.store.named(self.q, phrases)

    async def links(self, chunk_ids: Sequence[str], skip: set[str], cap: int, known: set[str]) -> HopLinks:
        return await self.store.passage_links(self.q, chunk_ids, skip, cap, known)


async def search_chunks(
    store: DocumentStore,
    q: ChunkQuery,
    text: str | None,
    mode: SearchMode,
    limit: int,
    params: PassageRankParams,
    among: Collection[str] | None = None,
) -> list[Chunk]:
    """The best `limit` chunks of the scope (of `among`, when given) with their scores, best first:
    the store's reads for them (candidates, each hop, the chunks) in one `read_as_one`."""
    if among is not None and not among:
        return []
    return await store.read_as_one(lambda reads: search_in(reads, q, text, mode, limit, params, among))


async def search_in(
    store: ChunkReads,
    q: ChunkQuery,
    text: str | None,
    mode: SearchMode,
    limit: int,
    params: PassageRankParams,
    among: Collection[str] | None,
) -> list[Chunk]:
    """`search_chunks` over the reads of one `read_as_one` (which may read more around it)."""
    words = bm25_terms(text) if text and mode != "vector" else []
    if mode == "graph" and q.vector is not None and among is None:
        ranked = await rank_passages(StorePassages(store, q), text or "", words, limit, params)
    else:
        depth = limit if mode in ("vector", "lexical") else FUSION_DEPTH * limit
        asked = replace(q, vector=None) if mode == "lexical" else q
        found = await store.candidates(asked, words, depth, None if among is None else list(among))
        ranked = rank_candidates(found.passages, "fused" if mode == "graph" else mode, limit)
    chunks = {c.id: c for c in await store.chunks(q.tenant, [c for c, _ in ranked])}
    return [chunks[c].model_copy(update={"score": s}) for c, s in ranked if c in chunks]


async def search_many(
    store: DocumentStore,
    tenant: Tenant,
    questions: Sequence[tuple[list[float] | None, str | None]],
    mode: SearchMode,
    limit: int,
    params: PassageRankParams,
) -> list[list[Chunk]]:
    """`search_chunks` for each (vector, text) of the tenant's scope: one candidates read and one
    chunks read, in one `read_as_one` (graph mode: one search after another, each its own
    neighbourhood)."""
    if mode == "graph":
        return [await search_chunks(store, ChunkQuery(tenant, v), t, mode, limit, params) for v, t in questions]
    if not questions:
        return []
    asked = [(None if mode == "lexical" else v, bm25_terms(t) if t and mode != "vector" else []) for v, t in questions]
    depth = limit if mode in ("vector", "lexical") else FUSION_DEPTH * limit

    async def work(reads: ChunkReads) -> list[list[Chunk]]:
        found = await reads.candidates_many(tenant, asked, depth)
        ranked = [rank_candidates(f.passages, mode, limit) for f in found]
        wanted = list(dict.fromkeys(c for r in ranked for c, _ in r))
        chunks = {c.id: c for c in await reads.chunks(tenant, wanted)} if wanted else {}
        return [[chunks[c].model_copy(update={"score": s}) for c, s in r if c in chunks] for r in ranked]

    return await store.read_as_one(work)


def rank_candidates(found: Sequence[Passage], mode: SearchMode, limit: int) -> list[tuple[str, float]]:
    """(chunk id, score) by cosine, by BM25 (only chunks holding a term), or both fused by
    reciprocal rank (ties by id)."""
    by_dense = sorted(found, key=lambda x: (-x.dense, x.id))
    by_lexical = sorted((x for x in found if x.lexical > 0), key=lambda x: (-x.lexical, x.id))
    if mode == "vector":
        return [(x.id, x.dense) for x in by_dense[:limit]]
    if mode == "lexical":
        return [(x.id, x.lexical) for x in by_lexical[:limit]]
    fused = reciprocal_rank_fusion([[x.id for x in by_dense], [x.id for x in by_lexical]])
    return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
