"""What graphrank and chunk search read from the Neo4j document store for one question
(algorithms/passage_rank.PassageSource), from Neo4j's own indexes: the vector index over chunk
embeddings (neo4j/chunk_search.py), the full-text index over the chunks' BM25 terms with the
tenant as a field of every Lucene query (`kg_chunk_text`), and one hop's links read with a
bounded read per concept. Cosines are computed in the store (`vector.similarity.cosine`): only
ids and scores cross the wire. Every query is constant Cypher with parameters; the scope is a
predicate inside it (neo4j/scope.py)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from processors.algorithms.bm25 import K1, B, Bm25Stats, best_bm25, query_terms
from processors.algorithms.passage_rank import Candidates, ConceptLinks, HopLinks, Passage, name_runs
from processors.stores.documents_protocol import tenant_token
from processors.stores.neo4j import term_stats
from processors.stores.neo4j.chunk_search import LEXICAL, by_vector
from processors.stores.neo4j.doc_writes import name_key
from processors.stores.neo4j.schema import Runner, cypher_vector, entity_key, lucene_phrase, node_key, rows_of
from processors.stores.neo4j.scope import IN_SCOPE, SCOPE_DOCS, UNSCOPED, tenant_params
from schemas.tenant import Tenant

RESCORE = 4  # full-text hits read per wanted hit, rescored with the collection's own statistics
SUBJECT_READ = 512  # subject chunks of one concept read in a hop
SUBJECT_KEEP = 64  # subject chunks of a named concept kept (the nearest the question)
_COS = "CASE WHEN $zero THEN 0.0 ELSE 2 * coalesce(vector.similarity.cosine(c.embedding, $vec), 0.5) - 1 END"
_IN_SCOPE_CHUNK = "(" + UNSCOPED + " OR EXISTS { MATCH (d:KgDocument)-[:HAS_CHUNK]->(c) WHERE " + IN_SCOPE + " })"

# The best BM25 chunks of the tenant: Lucene's own top k (the tenant clause scores 0).
TEXT_HITS = (
    "CALL db.index.fulltext.queryNodes('kg_chunk_text', $query, {limit: $k}) YIELD node AS c, score "
    "WHERE c.user = $user AND c.collection = $collection "
    "RETURN collect({id: c.id, lexical: c.lexical, sim: " + _COS + "}) AS rows"
)
SIMILARITIES = (
    "UNWIND $ckeys AS ck MATCH (c:KgChunk {key: ck}) WHERE c.user = $user AND c.collection = $collection "
    "AND " + _IN_SCOPE_CHUNK + " RETURN collect({id: c.id, sim: " + _COS + "}) AS rows"
)
CHUNK_COUNT = SCOPE_DOCS + " RETURN coalesce(sum(d.chunks), 0) AS n"
# The one concept each name (KgName key) names; a name of several concepts names none.
_BY_NAME = (
    "UNWIND $names AS nk MATCH (n:KgName {key: nk})-[:NAME_OF]->(e:KgEntity) "
    "WHERE n.user = $user AND n.collection = $collection "
    "WITH n.name AS k, collect(e) AS es WHERE size(es) = 1 WITH k, es[0] AS e "
)
NAMED = (
    _BY_NAME
    + "WHERE EXISTS { MATCH (d:KgDocument)-[:HAS_CHUNK]->(:KgChunk)-[:HAS_ENTITY]->(e) WHERE "
    + IN_SCOPE
    + " } "
    "CALL (e) { MATCH (d:KgDocument)-[:HAS_CHUNK]->(c:KgChunk)-[:ABOUT]->(e) WHERE " + IN_SCOPE + " "
    "WITH c LIMIT $read WITH c, " + _COS + " AS sim ORDER BY sim DESC, c.id LIMIT $keep "
    "RETURN collect({id: c.id, sim: sim}) AS subjects } "
    "RETURN k AS key, e.uri AS iri, subjects"
)
# The sources of a hop: their text, their own subject and what they mention.
SOURCES = (
    "UNWIND $ckeys AS ck MATCH (c:KgChunk {key: ck}) WHERE c.user = $user AND c.collection = $collection "
    "OPTIONAL MATCH (c)-[:ABOUT]->(own:KgEntity) "
    "CALL (c, own) { MATCH (c)-[:HAS_ENTITY]->(e:KgEntity) WHERE own IS NULL OR e <> own "
    "RETURN collect(e.uri) AS mentions } "
    "RETURN collect({id: c.id, text: c.text, own: own.uri, mentions: mentions}) AS rows"
)
# The rest of a hop, given its sources' mentions (`$ekeys`) and word runs (`$runs`: run -> the
# chunks whose text holds it) and own subjects (`$own`: chunk -> IRI): the subject concepts the
# runs name (a chunk in scope is about them); each concept's chunks in scope (at most $cap1 read:
# more means it carries no hop, so its subjects are not read: graphrank ranks nothing reached
# through it) and subjects, for the mentioned and named concepts not skipped
# (a named one only where it is not the chunk's own subject); and the cosines of the chunks they
# reach that are not known yet.
HOP = (
    "CALL () { "
    + _BY_NAME
    + "WHERE EXISTS { MATCH (d:KgDocument)-[:HAS_CHUNK]->(:KgChunk)-[:ABOUT]->(e) WHERE "
    + IN_SCOPE
    + " } RETURN collect({key: k, iri: e.uri, ekey: e.key}) AS named } "
    "WITH named, $ekeys + [x IN named WHERE NOT x.iri IN $skip "
    "AND any(cid IN $runs[x.key] WHERE coalesce($own[cid], '') <> x.iri) | x.ekey] AS wanted "
    "CALL (wanted) { UNWIND wanted AS ek WITH DISTINCT ek MATCH (e:KgEntity {key: ek}) "
    "WHERE e.user = $user AND e.collection = $collection "
    "CALL (e) { MATCH (c:KgChunk)-[:HAS_ENTITY]->(e) WHERE " + _IN_SCOPE_CHUNK + " "
    "WITH c LIMIT $cap1 RETURN collect(c) AS chunks } "
    "CALL (e, chunks) { WITH e, chunks WHERE size(chunks) < $cap1 MATCH (c:KgChunk)-[:ABOUT]->(e) WHERE "
    + _IN_SCOPE_CHUNK
    + " WITH c LIMIT $read RETURN collect(c) AS subjects } "
    "RETURN collect({uri: e.uri, chunks: chunks, subjects: subjects}) AS links } "
    "CALL (links) { UNWIND links AS l UNWIND CASE WHEN size(l.chunks) < $cap1 THEN l.chunks + l.subjects "
    "ELSE [] END AS c WITH DISTINCT c WHERE NOT c.id IN $known "
    "RETURN collect({id: c.id, sim: " + _COS + "}) AS sims } "
    "RETURN named, [l IN links | {uri: l.uri, chunks: [c IN l.chunks | c.id], "
    "subjects: [c IN l.subjects | c.id]}] AS links, sims"
)


def question_args(params: dict[str, Any], vector: Sequence[float] | None) -> dict[str, Any]:
    """The tenant + scope parameters with the question's vector ($vec, $zero)."""
    vec = cypher_vector(vector) if vector is not None else None
    return {**params, "vec": vec, "zero": vec is None or not any(vec)}


async def candidates(
    run: Runner, tenant: Tenant, vector: Sequence[float] | None, terms: Sequence[str], k: int,
    among: Sequence[str] | None,
) -> Candidates:  # fmt: skip
    """The `k` nearest chunks and the `k` best by BM25 (Lucene's over the tenant; exact over a
    scope's or `among`'s chunks), with cosines, and the chunks searched."""
    params = tenant_params(tenant)
    args = question_args(params, vector)
    scoped = not (params["doc_ids"] is None and params["meta"] is None) or among is not None
    dense: dict[str, float] = {}
    if vector is not None:
        dense = dict(await by_vector(run, {**params, "chunk_ids": among}, vector, k))
    lexical: dict[str, float] = {}
    words = sorted(query_terms(terms))
    stats: Bm25Stats | None = None
    if words and not scoped:
        query = f"tenant:{tenant_token(tenant)}^0 AND lexical:(" + " OR ".join(
            lucene_phrase(w) for w in words
        ) + ")"  # fmt: skip
        rows = rows_of(await run(TEXT_HITS, {**args, "query": query, "k": RESCORE * k}))
        stats = await term_stats.collection_stats(run, tenant, words)
        hits = [(r["id"], str(r["lexical"] or "").split()) for r in rows]
        lexical = best_bm25(hits, words, stats, k)
        dense.update({r["id"]: float(r["sim"]) for r in rows if r["id"] not in dense and vector is not None})
    elif words:
        token = tenant_token(tenant)
        queries = [{"t": w, "q": f"tenant:{token} AND lexical:{lucene_phrase(w)}"} for w in words]
        lex_args = {**params, "chunk_ids": among, "k1": K1, "b": B, "k": RESCORE * k, "terms": queries}
        stats = await term_stats.collection_stats(run, tenant, words)
        hits = [(r["id"], str(r["lexical"] or "").split()) for r in rows_of(await run(LEXICAL, lex_args))]
        lexical = best_bm25(hits, words, stats, k)
    missing = [i for i in lexical if i not in dense]
    if vector is not None and missing:
        dense.update(await similarities(run, tenant, vector, missing))
    if among is not None:
        searched = len(among)
    elif scoped:
        searched = int((await run(CHUNK_COUNT, params))[0]["n"])
    else:  # the collection's chunks: from the statistics the lexical search read, if it did
        searched = (stats or await term_stats.collection_stats(run, tenant, [])).chunks
    ids = list(dict.fromkeys([*dense, *lexical]))
    return Candidates([Passage(i, dense.get(i, 0.0), lexical.get(i, 0.0)) for i in ids], searched)


async def similarities(run: Runner, tenant: Tenant, vector: Sequence[float], ids: Sequence[str]) -> dict[str, float]:
    """Cosine of `vector` to each chunk of `ids` (in scope)."""
    if not ids:
        return {}
    keys = [node_key(tenant, i) for i in dict.fromkeys(ids)]
    rows = rows_of(await run(SIMILARITIES, {**question_args(tenant_params(tenant), vector), "ckeys": keys}))
    return {r["id"]: float(r["sim"]) for r in rows}


async def named(
    run: Runner, tenant: Tenant, phrases: Sequence[str], vector: Sequence[float]
) -> dict[str, tuple[str, list[Passage]]]:
    """Of `phrases`, the concept keys with a chunk in scope: key -> (concept, its nearest subjects)."""
    if not phrases:
        return {}
    names = [name_key(tenant, p) for p in dict.fromkeys(phrases)]
    args = {**question_args(tenant_params(tenant), vector), "names": names, "read": SUBJECT_READ, "keep": SUBJECT_KEEP}
    return {
        r["key"]: (r["iri"], [Passage(s["id"], float(s["sim"])) for s in r["subjects"]]) for r in await run(NAMED, args)
    }


async def links(
    run: Runner, tenant: Tenant, chunk_ids: Sequence[str], skip: Collection[str], cap: int,
    known: Collection[str], vector: Sequence[float],
) -> HopLinks:  # fmt: skip
    """One graphrank hop from `chunk_ids` (see sqlite/passages.links for what it holds)."""
    hop = HopLinks()
    if not chunk_ids:
        return hop
    params = tenant_params(tenant)
    ckeys = [node_key(tenant, i) for i in dict.fromkeys(chunk_ids)]
    sources = rows_of(await run(SOURCES, {**params, "ckeys": ckeys}))
    for r in sources:
        hop.concepts_of[r["id"]] = list(dict.fromkeys(r["mentions"]))
    runs: dict[str, set[str]] = {}
    for r in sources:
        for phrase in name_runs(r["text"] or ""):
            runs.setdefault(phrase, set()).add(r["id"])
    own = {r["id"]: r["own"] for r in sources if r["own"] is not None}
    mentioned = sorted({c for cs in hop.concepts_of.values() for c in cs} - set(skip))
    args = {**question_args(params, vector), "names": [name_key(tenant, k) for k in runs], "read": SUBJECT_READ,
            "runs": {k: sorted(v) for k, v in runs.items()}, "own": own, "skip": sorted(skip), "cap1": cap + 1,
            "ekeys": [entity_key(tenant, c) for c in mentioned], "known": sorted(known)}  # fmt: skip
    (row,) = await run(HOP, args)
    for named in row["named"]:
        for cid in sorted(runs[named["key"]]):
            have = hop.concepts_of.setdefault(cid, [])
            if named["iri"] != own.get(cid) and named["iri"] not in have:
                have.append(named["iri"])
    for link in row["links"]:
        chunks = link["chunks"]
        df = len(chunks)
        hop.concepts[link["uri"]] = ConceptLinks(df, link["subjects"], chunks) if df <= cap else ConceptLinks(df)
    hop.passages = [Passage(s["id"], float(s["sim"])) for s in row["sims"]]
    return hop
