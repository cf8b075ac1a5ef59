"""DocumentStore on Neo4j 5: the DRIFT spec's graph with kgflow's names, every node and
relationship carrying `user` and `collection` (keys: neo4j_schema.node_key / entity_key).

    (:KgDocument {key, id, title, timestamp, metadata (JSON), meta, content_hash, chunks, lexlen})
    (:KgDocument)-[:HAS_CHUNK]->(:KgChunk {key, id, document_id, ordinal, text, start, end,
                                           tokens, embedding, lexical, lexlen})
    (:KgChunk)-[:HAS_ENTITY {count}]->(:KgEntity)      the triple store's entity nodes (MERGEd)
    (:KgChunk)-[:SOURCE_OF]->(:KgRelation {key, s, p, o, embedding})   provenance: weight = sources
    KgEntity.concept                                   set while chunks mention it: true when
                                                       indexing created the entity (owned)

`lexical` holds the chunk's BM25 terms (relevance.bm25.terms) for the full-text index and
`lexlen` their count (a document's: its chunks' total), so a search scores BM25 with the
scope's own statistics (see neo4j_chunk_search). Scopes are predicates inside each query
(neo4j_scope.IN_SCOPE); all Cypher is constant text with parameters.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from processors.algorithms.bm25 import terms
from processors.algorithms.passage_rank import PassageRankParams
from processors.stores.documents_protocol import DocumentRecord, RemovedLinks
from processors.stores.neo4j import relations as neo4j_relations
from processors.stores.neo4j.chunk_search import GET_CHUNKS, chunk_of, search_chunks
from processors.stores.neo4j.communities import Neo4jCommunityStore
from processors.stores.neo4j.graph_index import BUMP, DROP_IF_EMPTY, Neo4jGraphIndex, version_params
from processors.stores.neo4j.schema import Neo4jConnection, Runner, entity_key, node_key, stored_vector
from processors.stores.neo4j.scope import IN_SCOPE, SCOPE_DOCS, keys, meta_pairs, tenant
from schemas.documents import Chunk, DocumentInfo, Mention, Scope, SearchMode

__all__ = ["Neo4jCommunityStore", "Neo4jDocumentStore"]

_TENANT = "user: $user, collection: $collection"
_OLD_CHUNKS = (
    "UNWIND $dkeys AS dk MATCH (d:KgDocument {key: dk}) WHERE d.user = $user AND d.collection = $collection "
    "MATCH (d)-[:HAS_CHUNK]->(c:KgChunk) "
)
# A store first write-locks its documents (creating the new ones), so two stores of one document
# (a redelivered batch, a retry after a timeout) run one after the other: the second reads and
# replaces what the first wrote instead of adding its mentions beside them.
LOCK_DOCS = (
    "UNWIND $dkeys AS dk MERGE (d:KgDocument {key: dk}) ON CREATE SET d.user = $user, d.collection = $collection "
    "SET d.writing = true REMOVE d.writing"
)
# What the documents' current chunks link: candidates for RemovedLinks.
OLD_LINKS = (
    _OLD_CHUNKS + "CALL (c) { MATCH (c)-[:SOURCE_OF]->(r:KgRelation) RETURN collect(r.key) AS rels } "
    "CALL (c) { MATCH (c)-[:HAS_ENTITY]->(e:KgEntity) RETURN collect([e.key, e.uri]) AS ents } "
    "RETURN rels, ents"
)
# Replacing: the old chunks lose their links; those the new version does not have go.
CLEAR_CHUNKS = (
    "UNWIND $docs AS row MATCH (d:KgDocument {key: row.key}) WHERE d.user = $user AND d.collection = $collection "
    "MATCH (d)-[:HAS_CHUNK]->(c:KgChunk) CALL (c) { MATCH (c)-[x:HAS_ENTITY|SOURCE_OF]->() DELETE x } "
    "WITH c, row WHERE NOT c.key IN row.chunk_keys DETACH DELETE c"
)
DELETE_DOCS = (
    "UNWIND $dkeys AS dk MATCH (d:KgDocument {key: dk}) WHERE d.user = $user AND d.collection = $collection "
    "CALL (d) { MATCH (d)-[:HAS_CHUNK]->(c:KgChunk) DETACH DELETE c } DETACH DELETE d"
)
WRITE_DOCS = (
    "UNWIND $docs AS row MERGE (d:KgDocument {key: row.key}) "
    "SET d.user = $user, d.collection = $collection, d += row.props"
)
WRITE_CHUNKS = (
    "UNWIND $chunks AS row MATCH (d:KgDocument {key: row.dkey}) MERGE (c:KgChunk {key: row.key}) "
    "SET c.user = $user, c.collection = $collection, c += row.props, c.embedding = row.vec "
    "MERGE (d)-[h:HAS_CHUNK]->(c) ON CREATE SET h.user = $user, h.collection = $collection"
)
WRITE_MENTIONS = (
    "UNWIND $mentions AS row MATCH (c:KgChunk {key: row.ckey}) "
    "MERGE (e:KgEntity {key: row.ekey}) ON CREATE SET e.user = $user, e.collection = $collection, e.uri = row.iri "
    "SET e.concept = coalesce(e.concept, row.owned), e.concept_key = coalesce(e.concept_key, row.concept_key) "
    "CREATE (c)-[:HAS_ENTITY {user: $user, collection: $collection, count: row.count}]->(e)"
)
WRITE_SOURCES = (
    "UNWIND $sources AS row MATCH (c:KgChunk {key: row.ckey}) MERGE (r:KgRelation {key: row.key}) "
    "ON CREATE SET r.user = $user, r.collection = $collection, r.s = row.s, r.p = row.p, r.o = row.o "
    "MERGE (c)-[x:SOURCE_OF]->(r) ON CREATE SET x.user = $user, x.collection = $collection"
)
# A relation keeps the first vector it was stored with (relation search, neo4j_relations).
WRITE_RELATION_VECTORS = (
    "UNWIND $relvecs AS row MATCH (r:KgRelation {key: row.key}) SET r.embedding = coalesce(r.embedding, row.vec)"
)
# Everything a store writes, in one query.
WRITE = (
    "CALL () { " + WRITE_DOCS + " } CALL () { " + WRITE_CHUNKS + " } "
    "CALL () { " + WRITE_MENTIONS + " } CALL () { " + WRITE_SOURCES + " } CALL () { " + WRITE_RELATION_VECTORS + " }"
)
# Of the candidates: relations no chunk supports any more (deleted, returned) and entities no
# chunk mentions (their concept flag goes; nodes nothing else uses go too).
UNSUPPORTED = (
    "UNWIND $rkeys AS k MATCH (r:KgRelation {key: k}) WHERE r.user = $user AND r.collection = $collection "
    "AND NOT EXISTS { (:KgChunk)-[:SOURCE_OF]->(r) } WITH r, r.s AS s, r.p AS p, r.o AS o DELETE r RETURN s, p, o"
)
UNMENTIONED = (
    "UNWIND $ekeys AS k MATCH (e:KgEntity {key: k}) WHERE e.user = $user AND e.collection = $collection "
    "AND NOT EXISTS { (:KgChunk)-[:HAS_ENTITY]->(e) } "
    "WITH e, e.uri AS iri, coalesce(e.concept, false) AS owned REMOVE e.concept "
    "WITH e, iri, owned CALL (e) { WITH e WHERE e.label IS NULL AND e.embedding IS NULL AND NOT (e)--() DELETE e } "
    "RETURN iri, owned"
)
CLAIM = (
    "UNWIND $rows AS row MERGE (e:KgEntity {key: row.ekey}) "
    "ON CREATE SET e.user = $user, e.collection = $collection, e.uri = row.iri "
    "SET e.concept = true, e.concept_key = coalesce(e.concept_key, row.concept_key)"
)
HASHES = (
    "UNWIND $dkeys AS dk MATCH (d:KgDocument {key: dk}) WHERE d.user = $user AND d.collection = $collection "
    "RETURN d.id AS id, d.content_hash AS hash"
)
# Chunks mentioning each entity (most mentions first, at most $per), and the given chunks' mentions.
ENTITY_LINKS = (
    "UNWIND $ekeys AS ek MATCH (e:KgEntity {key: ek}) WHERE e.user = $user AND e.collection = $collection "
    "CALL (e) { MATCH (d:KgDocument)-[:HAS_CHUNK]->(c:KgChunk)-[m:HAS_ENTITY]->(e) "
    "WHERE m.user = $user AND m.collection = $collection AND " + IN_SCOPE + " "
    "RETURN c.id AS chunk, m.count AS n ORDER BY n DESC, chunk LIMIT $per } "
    "RETURN e.uri AS entity, chunk, n"
)
CHUNK_LINKS = (
    "UNWIND $ckeys AS ck MATCH (c:KgChunk {key: ck}) WHERE c.user = $user AND c.collection = $collection "
    "MATCH (d:KgDocument)-[:HAS_CHUNK]->(c) WHERE " + IN_SCOPE + " "
    "MATCH (c)-[m:HAS_ENTITY]->(e:KgEntity) RETURN e.uri AS entity, c.id AS chunk, m.count AS n ORDER BY entity"
)
RELATIONS_AMONG = (
    "UNWIND $entities AS s MATCH (r:KgRelation {user: $user, collection: $collection, s: s}) "
    "WHERE r.o IN $entities MATCH (d:KgDocument)-[:HAS_CHUNK]->(c:KgChunk)-[:SOURCE_OF]->(r) WHERE " + IN_SCOPE + " "
    "WITH r, count(DISTINCT c) AS w RETURN r.s AS s, r.p AS p, r.o AS o, w ORDER BY w DESC, s, o, p LIMIT $limit"
)
DOCUMENTS = (
    SCOPE_DOCS + " RETURN d.id AS id, d.title AS title, d.chunks AS chunks, d.content_hash AS hash, "
    "d.timestamp AS ts ORDER BY id LIMIT $limit"
)
COUNTS = (
    "MATCH (d:KgDocument) WHERE d.user = $user AND d.collection IS NOT NULL "
    "RETURN d.collection AS collection, count(*) AS documents, sum(d.chunks) AS chunks"
)
_BATCHED = " } IN TRANSACTIONS OF 2000 ROWS"
DELETE_COLLECTION = (
    "MATCH (n:KgChunk {" + _TENANT + "}) CALL (n) { DETACH DELETE n" + _BATCHED,
    "MATCH (n:KgRelation {" + _TENANT + "}) CALL (n) { DETACH DELETE n" + _BATCHED,
    "MATCH (n:KgDocument {" + _TENANT + "}) CALL (n) { DETACH DELETE n" + _BATCHED,
    "MATCH (n:KgEntity {" + _TENANT + "}) WHERE n.concept IS NOT NULL CALL (n) { REMOVE n.concept "
    "WITH n WHERE n.label IS NULL AND n.embedding IS NULL AND NOT (n)--() DELETE n" + _BATCHED,
)


class Neo4jDocumentStore:
    """DocumentStore on Neo4j (see the module docstring)."""

    def __init__(self, conn: Neo4jConnection) -> None:
        self.conn = conn.acquire()
        self._graph = Neo4jGraphIndex(self.conn)

    async def store(self, user: str, collection: str, records: Sequence[DocumentRecord]) -> RemovedLinks:
        """Write documents, replacing earlier versions of the same ids, in one transaction;
        returns what the replaced versions linked that nothing links any more."""
        scope, rows = tenant(user, collection), _rows(user, collection, records)
        docs = {**scope, "docs": [{"key": d["key"], "chunk_keys": d["chunk_keys"]} for d in rows["docs"]]}
        params = {**scope, "dkeys": sorted(d["key"] for d in rows["docs"])}  # each query gets only what it reads

        async def work(run: Runner) -> RemovedLinks:
            await run(LOCK_DOCS, params)
            old = await _linked(run, params)
            await run(CLEAR_CHUNKS, docs)
            await run(WRITE, {**scope, **rows})
            await run(BUMP, version_params(user, collection))
            return await _unlinked(run, params, old)

        return await self.conn.write_tx(work)

    async def claim_concepts(self, user: str, collection: str, concepts: Mapping[str, str]) -> None:
        """Mark these concepts (IRI -> key) as indexing's on their entity nodes."""
        rows = [{"ekey": entity_key(user, collection, i), "iri": i, "concept_key": k} for i, k in concepts.items()]
        if rows:
            await self.conn.write([(CLAIM, {**tenant(user, collection), "rows": rows})])

    async def delete_documents(self, user: str, collection: str, ids: Sequence[str]) -> RemovedLinks:
        """Delete documents (chunks, mentions, provenance); returns what nothing links any more."""
        params = {**tenant(user, collection), "dkeys": keys(user, collection, ids)}

        async def work(run: Runner) -> RemovedLinks:
            old = await _linked(run, params)
            await run(DELETE_DOCS, params)
            await run(BUMP, version_params(user, collection))
            await run(DROP_IF_EMPTY, version_params(user, collection))
            return await _unlinked(run, params, old)

        return await self.conn.write_tx(work)

    async def delete_collection(self, user: str, collection: str) -> None:
        """Drop the collection's documents, chunks and provenance (in batches) and concept flags."""
        for cypher in DELETE_COLLECTION:
            await self.conn.autocommit(cypher, tenant(user, collection))
        await self.conn.autocommit(DROP_IF_EMPTY, version_params(user, collection))

    async def hashes(self, user: str, collection: str, ids: Sequence[str]) -> dict[str, str]:
        """Content hash of each stored document of `ids`."""
        rows = await self.conn.read(HASHES, {**tenant(user, collection), "dkeys": keys(user, collection, ids)})
        return {r["id"]: r["hash"] for r in rows}

    async def search(
        self,
        user: str,
        collection: str,
        vector: Sequence[float] | None,
        text: str | None,
        mode: SearchMode,
        limit: int,
        scope: Scope | None = None,
        params: PassageRankParams | None = None,
        chunk_ids: Collection[str] | None = None,
    ) -> list[Chunk]:
        """The best chunks of the scope (and of `chunk_ids`, when given) by vector and/or text (see
        neo4j_chunk_search), or by graphrank over the collection's index held in memory (see
        neo4j_graph_index)."""
        if chunk_ids is not None and not chunk_ids:
            return []
        tp = tenant(user, collection, scope)
        if mode != "graph":
            args = {**tp, "chunk_ids": None if chunk_ids is None else list(chunk_ids)}
            return await self.conn.read_tx(lambda run: search_chunks(run, args, vector, text, mode, limit))
        index = await self._graph.index(user, collection)
        if index is None:
            return []
        allowed = None if scope is None or scope.is_empty else await self._graph.allowed(tp)
        mask = index.mask(allowed, chunk_ids)
        hits = await asyncio.to_thread(self._graph.search, index, vector, text, limit, mask, params)
        by_id = {c.id: c for c in await self.chunks(user, collection, [c for c, _ in hits])}
        return [by_id[c].model_copy(update={"score": s}) for c, s in hits if c in by_id]

    async def chunks(self, user: str, collection: str, ids: Sequence[str], scope: Scope | None = None) -> list[Chunk]:
        """Chunks by id (in the scope), in the order asked."""
        if not ids:
            return []
        params = {**tenant(user, collection, scope), "ckeys": keys(user, collection, ids)}
        by_id = {r["id"]: chunk_of(r) for r in await self.conn.read(GET_CHUNKS, params)}
        return [by_id[i] for i in dict.fromkeys(ids) if i in by_id]

    async def links(
        self,
        user: str,
        collection: str,
        entities: Sequence[str],
        chunk_ids: Sequence[str],
        per_entity: int,
        scope: Scope | None = None,
    ) -> list[Mention]:
        """Chunks mentioning `entities` (at most `per_entity` each) and the mentions of `chunk_ids`."""
        params = {**tenant(user, collection, scope), "per": per_entity}
        params["ekeys"] = [entity_key(user, collection, e) for e in dict.fromkeys(entities)]
        params["ckeys"] = keys(user, collection, chunk_ids)

        async def work(run: Runner) -> list[dict[str, Any]]:
            rows = await run(ENTITY_LINKS, params) if entities else []
            return rows + (await run(CHUNK_LINKS, params) if chunk_ids else [])

        rows = await self.conn.read_tx(work)
        found = dict.fromkeys((r["entity"], r["chunk"], int(r["n"])) for r in rows)
        return [Mention(entity=e, chunk_id=c, count=n) for e, c, n in found]

    async def relations(
        self, user: str, collection: str, entities: Sequence[str], limit: int, scope: Scope | None = None
    ) -> list[tuple[str, str, str, int]]:
        """Relations among `entities` with their in-scope support (chunks), strongest first."""
        params = {**tenant(user, collection, scope), "entities": list(dict.fromkeys(entities)), "limit": limit}
        return [(r["s"], r["p"], r["o"], int(r["w"])) for r in await self.conn.read(RELATIONS_AMONG, params)]

    async def search_relations(
        self, user: str, collection: str, vector: Sequence[float], limit: int, scope: Scope | None = None
    ) -> list[tuple[str, str, str, float, int]]:
        """Relations (s, p, o, cosine, support) nearest `vector` with a source chunk in the scope."""
        return await neo4j_relations.search_relations(self.conn, user, collection, vector, limit, scope)

    async def relation_chunks(
        self,
        user: str,
        collection: str,
        relations: Sequence[tuple[str, str, str]],
        per_relation: int,
        scope: Scope | None = None,
    ) -> list[tuple[tuple[str, str, str], str]]:
        """Source chunks of relations in the scope, at most `per_relation` each."""
        return await neo4j_relations.relation_chunks(self.conn, user, collection, relations, per_relation, scope)

    async def scoped_entities(self, user: str, collection: str, scope: Scope) -> set[str]:
        """Entities a chunk in the (narrowing) scope mentions."""
        return await neo4j_relations.scoped_entities(self.conn, user, collection, scope)

    async def scoped_neighbours(
        self, user: str, collection: str, entities: Sequence[str], limit_per_entity: int, scope: Scope
    ) -> list[tuple[tuple[str, str, str, int, str, str], str]]:
        """Relation edges touching `entities` with a source chunk in the scope (out-edges first)."""
        return await neo4j_relations.scoped_neighbours(self.conn, user, collection, entities, limit_per_entity, scope)

    async def documents(self, user: str, collection: str, limit: int, scope: Scope | None = None) -> list[DocumentInfo]:
        """Documents of the scope in id order."""
        rows = await self.conn.read(DOCUMENTS, {**tenant(user, collection, scope), "limit": limit})
        return [
            DocumentInfo(id=r["id"], title=r["title"], chunks=r["chunks"], content_hash=r["hash"], timestamp=r["ts"])
            for r in rows
        ]

    async def counts(self, user: str) -> dict[str, tuple[int, int]]:
        """Collection -> (documents, chunks) for the user's collections that hold documents."""
        rows = await self.conn.read(COUNTS, {"user": user})
        return {r["collection"]: (int(r["documents"]), int(r["chunks"])) for r in rows}

    async def close(self) -> None:
        """Release the shared driver."""
        await self.conn.release()


def _rows(user: str, collection: str, records: Sequence[DocumentRecord]) -> dict[str, list[dict[str, Any]]]:
    """The UNWIND rows of documents, chunks, mentions and relation sources."""
    docs, chunks, mentions, sources, relvecs = [], [], [], [], []
    for r in records:
        d, dkey = r.document, node_key(user, collection, r.document.id)
        words = [terms(f"{d.title}\n{c.text}" if d.title else c.text) for c in r.chunks]  # as the embedded index
        lex, lexlen = [" ".join(w) for w in words], [len(w) for w in words]
        ckeys = [node_key(user, collection, c.id) for c in r.chunks]
        props = {"id": d.id, "title": d.title, "timestamp": d.timestamp.timestamp() if d.timestamp else None,
                 "metadata": json.dumps(d.metadata), "meta": meta_pairs(d.metadata), "content_hash": r.content_hash,
                 "chunks": len(r.chunks), "lexlen": sum(lexlen), "title_entity": r.title_entity}  # fmt: skip
        docs.append({"key": dkey, "chunk_keys": ckeys, "props": props})
        for c, v, ck, x, n in zip(r.chunks, r.vectors, ckeys, lex, lexlen, strict=True):
            cprops = {"id": c.id, "document_id": d.id, "ordinal": c.ordinal, "text": c.text, "start": c.start,
                      "end": c.end, "tokens": c.tokens, "lexical": x, "lexlen": n}  # fmt: skip
            chunks.append({"key": ck, "dkey": dkey, "props": cprops, "vec": stored_vector(v)})
        counts: dict[tuple[str, str], int] = {}
        for m in r.mentions:
            counts[m.chunk_id, m.entity] = counts.get((m.chunk_id, m.entity), 0) + m.count
        mentions += [
            {"ckey": node_key(user, collection, c), "ekey": entity_key(user, collection, e), "iri": e,
             "count": n, "owned": e in r.owned, "concept_key": r.keys.get(e)}
            for (c, e), n in counts.items()
        ]  # fmt: skip
        sources += [
            {"ckey": node_key(user, collection, c), "key": node_key(user, collection, x.s, x.p, x.o),
             "s": x.s, "p": x.p, "o": x.o}
            for x in r.relations for c in dict.fromkeys(x.chunk_ids)
        ]  # fmt: skip
        relvecs += [
            {"key": node_key(user, collection, x.s, x.p, x.o), "vec": stored_vector(x.vector)}
            for x in r.relations
            if x.vector is not None
        ]
    return {"docs": docs, "chunks": chunks, "mentions": mentions, "sources": sources, "relvecs": relvecs}


async def _linked(run: Runner, params: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """Relation keys and entities (key -> IRI) the documents of `dkeys` link now."""
    rows = await run(OLD_LINKS, params)
    rels = sorted({k for r in rows for k in r["rels"]})
    return rels, {k: iri for r in rows for k, iri in r["ents"]}


async def _unlinked(run: Runner, params: dict[str, Any], old: tuple[list[str], dict[str, str]]) -> RemovedLinks:
    """Of what the removed versions linked: unsupported relations, unmentioned owned concepts."""
    rkeys, entities = old
    rels = await run(UNSUPPORTED, {**params, "rkeys": rkeys}) if rkeys else []
    ents = await run(UNMENTIONED, {**params, "ekeys": sorted(entities)}) if entities else []
    return RemovedLinks(
        relations=sorted((r["s"], r["p"], r["o"]) for r in rels),
        concepts=sorted(r["iri"] for r in ents if r["owned"]),
        touched=sorted(entities.values()),
    )
