"""graphrank on Neo4j: the collection's chunk index (vectors, BM25 over title and text, concept
graph) read from Neo4j into this processor's memory — the same ChunkIndex the embedded store
ranks with, so both backends rank alike — and rebuilt when a write moves the collection's
version (a `KgDocsVersion` node every document write sets to a fresh random number — not a
counter, so a collection deleted and loaded again never matches an index cached before)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np

from processors.algorithms.passage_rank import PassageRankParams, build_concepts
from processors.stores.local.chunk_index import ChunkIndex
from processors.stores.neo4j.schema import Neo4jConnection, Runner, node_key
from processors.stores.neo4j.scope import SCOPE_DOCS

BUMP = (
    "MERGE (v:KgDocsVersion {key: $vkey}) ON CREATE SET v.user = $user, v.collection = $collection "
    "SET v.version = 1 + toInteger(rand() * 9007199254740991)"
)
# no documents left: no version node either (nothing of a tenant outlives its data)
DROP_IF_EMPTY = (
    "MATCH (v:KgDocsVersion {key: $vkey}) "
    "WHERE NOT EXISTS { MATCH (d:KgDocument {user: $user, collection: $collection}) } DETACH DELETE v"
)
VERSION = "MATCH (v:KgDocsVersion {key: $vkey}) RETURN v.version AS version"
INDEX_CHUNKS = (
    "MATCH (d:KgDocument {user: $user, collection: $collection})-[:HAS_CHUNK]->(c:KgChunk) "
    "RETURN c.id AS id, c.document_id AS document_id, c.text AS text, c.embedding AS vec, d.title AS title, "
    "d.title_entity AS title_entity ORDER BY id"
)
INDEX_MENTIONS = (
    "MATCH (c:KgChunk {user: $user, collection: $collection})-[:HAS_ENTITY]->(e:KgEntity) "
    "RETURN c.id AS chunk, e.uri AS entity, e.concept_key AS key"
)
SCOPED_DOC_IDS = SCOPE_DOCS + " RETURN d.id AS id"


def version_params(user: str, collection: str) -> dict[str, Any]:
    """Parameters of BUMP / VERSION."""
    return {"user": user, "collection": collection, "vkey": node_key(user, collection, "docs-version")}


class Neo4jGraphIndex:
    """Cached per collection; `search` ranks by graphrank within a scope's documents."""

    def __init__(self, conn: Neo4jConnection) -> None:
        self.conn = conn
        self._cache: dict[tuple[str, str], ChunkIndex] = {}
        self._lock = asyncio.Lock()

    async def index(self, user: str, collection: str) -> ChunkIndex | None:
        """The collection's index (None: no documents)."""
        vp = version_params(user, collection)
        rows = await self.conn.read(VERSION, vp)
        version = int(rows[0]["version"]) if rows else 0
        if version == 0:
            return None
        async with self._lock:
            cached = self._cache.get((user, collection))
            if cached is None or cached.version != version:
                cached = self._cache[(user, collection)] = await self._build(user, collection, version)
        return cached

    async def _build(self, user: str, collection: str, version: int) -> ChunkIndex:
        scope = {"user": user, "collection": collection}

        async def read(run: Runner) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
            return await run(INDEX_CHUNKS, scope), await run(INDEX_MENTIONS, scope)

        chunks, mentions = await self.conn.read_tx(read)
        return await asyncio.to_thread(_assemble, version, chunks, mentions)

    async def allowed(self, params: dict[str, Any]) -> set[str]:
        """The scope's documents (`params`: tenant + scope, see neo4j_scope.tenant)."""
        return {r["id"] for r in await self.conn.read(SCOPED_DOC_IDS, params)}

    def search(
        self,
        index: ChunkIndex,
        vector: Sequence[float] | None,
        text: str | None,
        limit: int,
        mask: np.ndarray | None,
        params: PassageRankParams | None,
    ) -> list[tuple[str, float]]:
        """(chunk id, score) by graphrank over the rows of `mask` (None: all)."""
        hits = index.search(vector, text, "graph", limit, mask, params)
        return [(index.ids[i], s) for i, s in hits]


def _assemble(version: int, chunks: list[dict[str, Any]], mentions: list[dict[str, Any]]) -> ChunkIndex:
    """A ChunkIndex from Neo4j rows (a chunk without a vector scores 0 by cosine)."""
    ids = [r["id"] for r in chunks]
    dim = next((len(r["vec"]) for r in chunks if r["vec"]), 1)
    vecs = np.asarray([r["vec"] or [0.0] * dim for r in chunks], dtype=np.float32).reshape(len(chunks), dim)
    at = {c: i for i, c in enumerate(ids)}
    pairs = [(at[m["chunk"]], m["entity"]) for m in mentions if m["chunk"] in at]
    keys = {m["entity"]: m["key"] for m in mentions if m["key"]}
    texts = [f"{r['title']}\n{r['text']}" if r["title"] else r["text"] for r in chunks]
    concepts = build_concepts([r["text"] for r in chunks], [r["title_entity"] for r in chunks], pairs, keys)
    return ChunkIndex.build(version, ids, [r["document_id"] for r in chunks], texts, vecs, concepts, pairs)
