"""Chunk candidates on Neo4j from its own indexes (neo4j/passages.py ranks nothing: the documents
service does, for every backend alike).

* vector, unscoped: the global HNSW index over-fetched (`ANN_OVERFETCH` x depth) and filtered
  to the tenant; when that leaves fewer than the depth wanted and the index may hold more, an
  exact scan of the tenant's chunks answers instead.
* vector, scoped: exact `vector.similarity.cosine` over the scope's chunks (no index can filter
  a document set or metadata before ranking).
* among given chunks (`$chunk_ids`, e.g. a community's): the exact scan and the full-text
  query keep only those chunks (never the index's global top k).
* lexical within a scope (or among given chunks): the full-text index (whitespace analyzer over
  the chunk's BM25 terms, the tenant a field of the query) finds each query term's chunks; the
  query scores them with the scope's chunk count and mean length (kept per document) and the
  terms' in-scope document frequencies. Unscoped, Lucene's own BM25 top k answers (passages.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from processors.stores.neo4j.schema import Runner, cypher_vector, rows_of
from processors.stores.neo4j.scope import IN_SCOPE, SCOPE_DOCS, keys, tenant_params
from schemas.documents import Chunk
from schemas.tenant import Tenant

ANN_OVERFETCH = 10
Ranked = tuple[str, float]  # (chunk id, score)
ANN_MIN_K = 100
ANN_MAX_K = 10_000

CHUNK_ROW = (
    "{id: c.id, document_id: c.document_id, ordinal: c.ordinal, text: c.text, start: c.start, stop: c.`end`, "
    "tokens: c.tokens, title: d.title, page: c.page, section: c.section}"
)
# The rows as one record (schema.rows_of): the async driver takes a message per record.
GET_CHUNKS = (
    "UNWIND $ckeys AS ck MATCH (c:KgChunk {key: ck}) WHERE c.user = $user AND c.collection = $collection "
    "MATCH (d:KgDocument)-[:HAS_CHUNK]->(c) WHERE " + IN_SCOPE + " RETURN collect(" + CHUNK_ROW + ") AS rows"
)
# The cosine the embedded index computes: a zero query or stored vector scores 0 (Neo4j's
# similarity is (1 + cos) / 2, null for a missing vector).
_COS = "CASE WHEN $zero THEN 0.0 ELSE 2 * coalesce(vector.similarity.cosine(c.embedding, $vec), 0.5) - 1 END"
VECTOR_ANN = (
    "CALL db.index.vector.queryNodes('kg_chunk_embedding', $k, $vec) YIELD node AS c "
    "WITH count(*) AS total, collect(CASE WHEN c.user = $user AND c.collection = $collection "
    "THEN {id: c.id, sim: " + _COS + "} END) AS hits RETURN total, hits"
)
AMONG = "($chunk_ids IS NULL OR c.id IN $chunk_ids)"
VECTOR_EXACT = (
    SCOPE_DOCS + " MATCH (d)-[:HAS_CHUNK]->(c:KgChunk) WHERE " + AMONG + " WITH c, " + _COS + " AS sim "
    "ORDER BY sim DESC, c.id LIMIT $k RETURN c.id AS id, sim"
)
LEXICAL = (
    SCOPE_DOCS + " WITH sum(d.chunks) AS n, sum(d.lexlen) AS total "
    "WITH n, CASE WHEN total = 0 THEN 1.0 ELSE toFloat(total) / n END AS mean_len "
    "UNWIND $terms AS term CALL (term) { "
    "CALL db.index.fulltext.queryNodes('kg_chunk_text', term.q) YIELD node AS c "
    "WHERE c.user = $user AND c.collection = $collection "
    "MATCH (d:KgDocument)-[:HAS_CHUNK]->(c) WHERE " + IN_SCOPE + " AND " + AMONG + " "
    "WITH c, size([x IN split(c.lexical, ' ') WHERE x = term.t]) AS tf WHERE tf > 0 "
    "RETURN collect({c: c, tf: tf}) AS posts } "
    "WITH n, mean_len, posts, log(1 + (n - size(posts) + 0.5) / (size(posts) + 0.5)) AS idf "
    "UNWIND posts AS p WITH p.c AS c, "
    "sum(idf * p.tf * ($k1 + 1) / (p.tf + $k1 * (1 - $b + $b * p.c.lexlen / mean_len))) AS score "
    "ORDER BY score DESC, c.id LIMIT $k RETURN collect({id: c.id, lexical: c.lexical, score: score}) AS rows"
)


def chunk_of(r: dict[str, Any]) -> Chunk:
    """A chunk from a `CHUNK_ROW` map."""
    return Chunk(id=r["id"], document_id=r["document_id"], ordinal=r["ordinal"], text=r["text"], start=r["start"],
                 end=r["stop"], tokens=r["tokens"], title=r["title"] or "", page=r.get("page"),
                 section=r.get("section") or "")  # fmt: skip


async def chunks_read(run: Runner, tenant: Tenant, ids: Sequence[str]) -> list[Chunk]:
    """Chunks by id (in the scope), in the order asked."""
    if not ids:
        return []
    rows = rows_of(await run(GET_CHUNKS, {**tenant_params(tenant), "ckeys": keys(tenant, ids)}))
    by_id = {r["id"]: chunk_of(r) for r in rows}
    return [by_id[i] for i in dict.fromkeys(ids) if i in by_id]


async def by_vector(run: Runner, params: dict[str, Any], vector: Sequence[float], depth: int) -> list[Ranked]:
    """(chunk id, cosine) of the `depth` nearest chunks, best first (ties by id)."""
    rows = await vector_index_query(run, params, vector, depth, VECTOR_ANN, VECTOR_EXACT, lambda r: r["id"])
    return [(r["id"], float(r["sim"])) for r in rows]


async def vector_index_query(
    run: Runner,
    params: dict[str, Any],
    vector: Sequence[float],
    depth: int,
    ann: str,
    exact: str,
    key: Callable[[dict[str, Any]], Any],
) -> list[dict[str, Any]]:
    """The `depth` rows nearest `vector`, best first (ties by `key`): unscoped, from the `ann`
    query (index over-fetched, hits of the tenant) unless that leaves fewer than `depth` (HNSW
    may miss nodes even when asked for more than it holds); else from the `exact` query (both
    take $vec, $zero, $k and the tenant)."""
    vec = cypher_vector(vector)
    zero = not any(vec)
    args = {**params, "vec": vec, "zero": zero, "k": depth}
    if not zero and params["doc_ids"] is None and params["meta"] is None and params.get("chunk_ids") is None:
        k = min(max(depth * ANN_OVERFETCH, ANN_MIN_K), ANN_MAX_K)
        (found,) = await run(ann, {**args, "k": k})
        if len(found["hits"]) >= depth:
            return sorted(found["hits"], key=lambda h: (-h["sim"], key(h)))[:depth]
    return await run(exact, args)
