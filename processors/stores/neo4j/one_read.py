"""A question's candidates on Neo4j in ONE Cypher statement (issue 38: few store round trips).

For each question of a tenant's whole collection (no scope, no `among`), one row of the query
holds everything graphrank starts from: the vector index's nearest chunks of the tenant with
their cosines, Lucene's BM25 hits with their terms and cosines, the collection's BM25 statistics
(chunks, terms, and the document frequency of each query term) and the concepts the question's
phrases name with their nearest subject chunks. Several questions (a follow-up round) go in the
same statement, one row each. What needs a second statement: a tenant whose share of the vector
index is too small for the over-fetched ANN to return `k` of its chunks (exact scan, as
chunk_search.vector_index_query does), and a scope (passages.candidates reads it step by step).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from processors.algorithms.bm25 import Bm25Stats, best_bm25, query_terms
from processors.algorithms.passage_rank import Candidates, Passage
from processors.stores.documents_protocol import tenant_token
from processors.stores.neo4j.chunk_search import ANN_MAX_K, ANN_MIN_K, ANN_OVERFETCH, VECTOR_EXACT
from processors.stores.neo4j.doc_writes import name_key
from processors.stores.neo4j.passages import RESCORE, SUBJECT_KEEP, SUBJECT_READ
from processors.stores.neo4j.schema import Runner, cypher_vector, lucene_phrase, node_key
from processors.stores.neo4j.scope import IN_SCOPE, tenant_params
from processors.stores.neo4j.term_stats import stats_key
from schemas.tenant import Tenant

# The cosine of chunk `c` to the question `q` (0 without a question vector).
_COS = "CASE WHEN q.vec IS NULL THEN 0.0 ELSE 2 * coalesce(vector.similarity.cosine(c.embedding, q.vec), 0.5) - 1 END"
_TENANT = "c.user = $user AND c.collection = $collection"
CANDIDATES = (
    "UNWIND range(0, size($questions) - 1) AS i WITH i, $questions[i] AS q "
    # the nearest chunks: the index over-fetched, the tenant's kept
    "CALL (q) { WITH q WHERE q.vec IS NOT NULL "
    "CALL db.index.vector.queryNodes('kg_chunk_embedding', q.ann_k, q.vec) YIELD node AS c "
    "WITH q, c WHERE " + _TENANT + " RETURN collect({id: c.id, sim: " + _COS + "}) AS dense } "
    # Lucene's BM25 top hits of the tenant (rescored by the caller with the collection's statistics)
    "CALL (q) { WITH q WHERE q.query IS NOT NULL "
    "CALL db.index.fulltext.queryNodes('kg_chunk_text', q.query, {limit: q.text_k}) YIELD node AS c "
    "WITH q, c WHERE " + _TENANT + " RETURN collect({id: c.id, lexical: c.lexical, sim: " + _COS + "}) AS texts } "
    "CALL (q) { UNWIND q.tkeys AS tk MATCH (t:KgTerm {key: tk}) RETURN collect([t.term, t.df]) AS dfs } "
    "CALL () { OPTIONAL MATCH (s:KgCollectionStats {key: $skey}) RETURN s.chunks AS chunks, s.terms AS terms } "
    # the one concept each phrase names (a chunk in scope mentions it) and its nearest subject chunks
    "CALL (q) { UNWIND q.names AS nk MATCH (n:KgName {key: nk})-[:NAME_OF]->(e:KgEntity) "
    "WHERE n.user = $user AND n.collection = $collection "
    "WITH q, n.name AS k, collect(e) AS es WHERE size(es) = 1 WITH q, k, es[0] AS e "
    "WHERE EXISTS { MATCH (d:KgDocument)-[:HAS_CHUNK]->(:KgChunk)-[:HAS_ENTITY]->(e) WHERE " + IN_SCOPE + " } "
    "CALL (q, e) { MATCH (d:KgDocument)-[:HAS_CHUNK]->(c:KgChunk)-[:ABOUT]->(e) WHERE " + IN_SCOPE + " "
    "WITH q, c LIMIT $read WITH c, " + _COS + " AS sim ORDER BY sim DESC, c.id LIMIT $keep "
    "RETURN collect({id: c.id, sim: sim}) AS subjects } "
    "RETURN collect({key: k, iri: e.uri, subjects: subjects}) AS named } "
    "RETURN i, dense, texts, dfs, chunks, terms, named ORDER BY i"
)


def one_read(tenant: Tenant, vector: Sequence[float] | None, among: Sequence[str] | None) -> bool:
    """Whether a question's candidates can be read by `CANDIDATES` (the whole collection, and a
    question vector that is not zero: a zero one ranks by the exact scan)."""
    params = tenant_params(tenant)
    unscoped = params["doc_ids"] is None and params["meta"] is None and among is None
    return unscoped and (vector is None or any(cypher_vector(vector)))


def _question(tenant: Tenant, vector: Sequence[float] | None, terms: Sequence[str], k: int,
              phrases: Sequence[str]) -> dict[str, Any]:  # fmt: skip
    """The parameters of one question of `CANDIDATES`."""
    words = sorted(query_terms(terms))
    query = None
    if words:
        query = f"tenant:{tenant_token(tenant)}^0 AND lexical:(" + " OR ".join(lucene_phrase(w) for w in words) + ")"
    return {
        "vec": cypher_vector(vector) if vector is not None else None,
        "ann_k": min(max(k * ANN_OVERFETCH, ANN_MIN_K), ANN_MAX_K),
        "query": query,
        "text_k": RESCORE * k,
        "words": words,
        "tkeys": [node_key(tenant, "term", w) for w in words],
        "names": [name_key(tenant, p) for p in dict.fromkeys(phrases)],
    }


async def candidates_read(
    run: Runner, tenant: Tenant, questions: Sequence[tuple[Sequence[float] | None, Sequence[str], Sequence[str]]],
    k: int,
) -> list[Candidates]:  # fmt: skip
    """The candidates of each (vector, terms, phrases) question of the whole collection (see
    passages.candidates for what they hold): one statement for them all, and one more for each
    question whose nearest chunks the vector index did not return (see the module docstring)."""
    asked = [_question(tenant, v, terms, k, phrases) for v, terms, phrases in questions]
    params = {**tenant_params(tenant), "skey": stats_key(tenant), "read": SUBJECT_READ, "keep": SUBJECT_KEEP}
    sent = [{x: q[x] for x in ("vec", "ann_k", "query", "text_k", "tkeys", "names")} for q in asked]
    rows = sorted(await run(CANDIDATES, {**params, "questions": sent}), key=lambda r: r["i"])
    out = []
    for q, row in zip(asked, rows, strict=True):
        dense: dict[str, float] = {}
        if q["vec"] is not None:
            hits = sorted(row["dense"], key=lambda h: (-h["sim"], h["id"]))
            if len(hits) < k:  # the tenant's share of the index is small: the exact scan
                exact = {**params, "chunk_ids": None, "vec": q["vec"], "zero": False, "k": k}
                hits = await run(VECTOR_EXACT, exact)
            dense = {h["id"]: float(h["sim"]) for h in hits[:k]}
        stats = Bm25Stats(int(row["chunks"] or 0), int(row["terms"] or 0), {t: int(n) for t, n in row["dfs"]})
        lexical: dict[str, float] = {}
        if q["query"] is not None:
            texts = row["texts"]
            lexical = best_bm25([(h["id"], str(h["lexical"] or "").split()) for h in texts], q["words"], stats, k)
            if q["vec"] is not None:
                dense.update({h["id"]: float(h["sim"]) for h in texts if h["id"] not in dense})
        ids = list(dict.fromkeys([*dense, *lexical]))
        found = Candidates([Passage(i, dense.get(i, 0.0), lexical.get(i, 0.0)) for i in ids], stats.chunks)
        found.named = {
            n["key"]: (n["iri"], [Passage(s["id"], float(s["sim"])) for s in n["subjects"]]) for n in row["named"]
        }
        out.append(found)
    return out
