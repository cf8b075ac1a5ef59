"""A collection's BM25 statistics on Neo4j, kept by every document write: its chunks and their
total term count (`KgCollectionStats`) and the chunks holding each term (`KgTerm.df`). Lucene's
own statistics are the whole index's — every tenant's — so candidates found through it are
rescored with these (a collection ranks by its own statistics, whoever shares the index)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from processors.algorithms.bm25 import Bm25Stats
from processors.stores.neo4j.schema import Runner, node_key
from schemas.tenant import Tenant

ADJUST_TERMS = (
    "UNWIND $terms AS row MERGE (t:KgTerm {key: row.key}) "
    "ON CREATE SET t.user = $user, t.collection = $collection, t.term = row.term, t.df = 0 "
    "SET t.df = t.df + row.n WITH t WHERE t.df <= 0 DELETE t"
)
ADJUST_TOTALS = (
    "MERGE (s:KgCollectionStats {key: $skey}) "
    "ON CREATE SET s.user = $user, s.collection = $collection, s.chunks = 0, s.terms = 0 "
    "SET s.chunks = s.chunks + $chunks, s.terms = s.terms + $nterms "
    "WITH s WHERE s.chunks <= 0 DELETE s"  # nothing of a tenant outlives its data
)
TOTALS = "MATCH (s:KgCollectionStats {key: $skey}) RETURN s.chunks AS chunks, s.terms AS terms"
DFS = "UNWIND $tkeys AS tk MATCH (t:KgTerm {key: tk}) RETURN t.term AS term, t.df AS df"
# Old chunks' terms, read before a replace or delete takes them away.
OLD_TERMS = (
    "UNWIND $dkeys AS dk MATCH (d:KgDocument {key: dk}) WHERE d.user = $user AND d.collection = $collection "
    "MATCH (d)-[:HAS_CHUNK]->(c:KgChunk) RETURN c.lexical AS lexical"
)
DELETE_TERMS = (
    "MATCH (n:KgTerm {user: $user, collection: $collection}) CALL (n) { DELETE n } IN TRANSACTIONS OF 5000 ROWS"
)
DELETE_TOTALS = "MATCH (n:KgCollectionStats {user: $user, collection: $collection}) DELETE n"


def stats_key(tenant: Tenant) -> str:
    """The key of a collection's statistics node."""
    return node_key(tenant, "stats")


async def adjust(run: Runner, tenant: Tenant, chunk_terms: Sequence[Sequence[str]], sign: int) -> None:
    """Add (1) or take away (-1) chunks, given their BM25 terms, from the kept statistics (terms
    in key order: concurrent writers lock them in the same order)."""
    if not chunk_terms:
        return
    df = Counter(t for words in chunk_terms for t in set(words))
    rows = [{"key": node_key(tenant, "term", t), "term": t, "n": sign * n} for t, n in sorted(df.items())]
    params: dict[str, Any] = {"user": tenant.user, "collection": tenant.collection}
    await run(ADJUST_TERMS, {**params, "terms": rows})
    nterms = sign * sum(len(w) for w in chunk_terms)
    await run(ADJUST_TOTALS, {**params, "skey": stats_key(tenant), "chunks": sign * len(chunk_terms),
                              "nterms": nterms})  # fmt: skip


async def take_away(run: Runner, tenant: Tenant, dkeys: list[str]) -> None:
    """Take the chunks of the documents `dkeys` out of the kept statistics."""
    params = {"user": tenant.user, "collection": tenant.collection, "dkeys": dkeys}
    old = [str(r["lexical"] or "").split() for r in await run(OLD_TERMS, params)]
    await adjust(run, tenant, old, -1)


async def collection_stats(run: Runner, tenant: Tenant, query_terms: Sequence[str]) -> Bm25Stats:
    """The collection's statistics for these terms."""
    totals = await run(TOTALS, {"skey": stats_key(tenant)})
    keys = [node_key(tenant, "term", t) for t in dict.fromkeys(query_terms)]
    dfs = {r["term"]: int(r["df"]) for r in await run(DFS, {"tkeys": keys})} if keys else {}
    chunks, terms = (int(totals[0]["chunks"]), int(totals[0]["terms"])) if totals else (0, 0)
    return Bm25Stats(chunks, terms, dfs)
