"""DocumentStore on Neo4j 5: the DRIFT spec's graph with kgflow's names, every node carrying
`user` and `collection` (keys: neo4j_schema.node_key / entity_key). The links between them
(HAS_CHUNK, HAS_ENTITY, REL_END, ABOUT, NAME_OF, KG_REL) carry no tenant: both ends of a link belong to
one tenant and every read reaches a link from a node it checked, and a chunk's ~55 links with a
tenant on each were a property record apiece (issue 38).

    (:KgDocument {key, id, title, timestamp, metadata (JSON), meta, content_hash, chunks, lexlen})
    (:KgDocument)-[:HAS_CHUNK]->(:KgChunk {key, id, document_id, ordinal, text, start, end,
                                           tokens, embedding, lexical, lexlen})
    (:KgChunk)-[:HAS_ENTITY {count}]->(:KgEntity)      the triple store's entity nodes (MERGEd)
    (:KgEntity)-[:KG_REL {p, src}]->(:KgEntity)       a relation; `src` its source chunks' numbers
    (:KgChunk {n})                                     (KgChunk.n, a 63-bit digest of the chunk key):
                                                       support = sources (see relations.py)
    (:KgChunk)-[:REL_END]->(:KgEntity)                 an end of a relation the chunk is a source
                                                       of but does not mention (see doc_writes.py)
    KgEntity.concept                                   set while chunks mention it: true when
                                                       indexing created the entity (owned)

    (:KgChunk)-[:ABOUT]->(:KgEntity)                   the chunk's subject (its document's title names it)

`lexical` holds the chunk's BM25 terms (algorithms/bm25.terms) and `tenant` a hash of user +
collection, both in the full-text index `kg_chunk_text` (every Lucene query names the tenant),
and `lexlen` their count (a document's: its chunks' total), so a scoped search scores BM25 with
the scope's own statistics (see chunk_search). Reads go through the store's indexes and a bounded
read per hop (passages.py): none holds a collection in the process. Scopes are predicates inside
each query (scope.IN_SCOPE); all Cypher is constant text with parameters.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import TypeVar

from processors.algorithms.passage_rank import Candidates, HopLinks, Passage
from processors.stores.chunk_reads import ChunkReads
from processors.stores.documents_protocol import (
    ChunkQuery,
    DocumentCounts,
    DocumentRecord,
    Episodes,
    RelationChunk,
    RelationHit,
    RemovedLinks,
    tenant_token,
)
from processors.stores.neo4j import deletions, passages, term_stats
from processors.stores.neo4j import relations as neo4j_relations
from processors.stores.neo4j.chunk_search import chunks_read
from processors.stores.neo4j.communities import Neo4jCommunityStore
from processors.stores.neo4j.doc_migration import migrate_documents
from processors.stores.neo4j.doc_writes import (
    CLEAR_CHUNKS,
    DELETE_DOCS,
    LOCK_DOCS,
    WRITE,
    linked,
    unlinked,
    write_rows,
)
from processors.stores.neo4j.entity_search import concept_keys_read
from processors.stores.neo4j.mention_links import CHUNK_LINKS, mention_links
from processors.stores.neo4j.schema import Neo4jConnection, Runner, entity_key
from processors.stores.neo4j.scope import IN_SCOPE, SCOPE_DOCS, keys, tenant_params
from processors.stores.neo4j.spellings import DELETE_COLLECTION as DELETE_SPELLINGS
from processors.stores.neo4j.spellings import adjust_spellings, read_spellings, stored_spellings
from processors.stores.neo4j.term_stats import DELETE_TERMS, DELETE_TOTALS
from processors.stores.neo4j.tx_reads import TxReads, question_vector
from schemas.documents import Chunk, DocumentInfo, Mention
from schemas.tenant import Tenant

__all__ = ["Neo4jCommunityStore", "Neo4jDocumentStore"]
T = TypeVar("T")

_TENANT = "user: $user, collection: $collection"
# A claim (see DocumentStore.claim) flags the concept owned before any chunk mentions it.
CLAIM_CONCEPTS = (
    "UNWIND $rows AS row MERGE (e:KgEntity {key: row.ekey}) "
    "ON CREATE SET e.user = $user, e.collection = $collection, e.uri = row.iri "
    "SET e.concept = true, e.concept_key = coalesce(e.concept_key, row.key)"
)
OWNED_CONCEPTS = "UNWIND $ekeys AS k MATCH (e:KgEntity {key: k}) WHERE e.concept = true RETURN e.uri AS iri"
HASHES = (
    "UNWIND $dkeys AS dk MATCH (d:KgDocument {key: dk}) WHERE d.user = $user AND d.collection = $collection "
    "RETURN d.id AS id, d.content_hash AS hash"
)
# Per entity, the distinct documents in scope with a timestamp in [$since, $until] that mention it.
EPISODE_COUNTS = (
    "UNWIND $ekeys AS ek MATCH (e:KgEntity {key: ek}) WHERE e.user = $user AND e.collection = $collection "
    "CALL (e) { MATCH (d:KgDocument)-[:HAS_CHUNK]->(:KgChunk)-[:HAS_ENTITY]->(e) "
    "WHERE d.timestamp >= $since AND d.timestamp <= $until AND " + IN_SCOPE + " RETURN count(DISTINCT d) AS n } "
    "RETURN e.uri AS entity, n"
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
    "MATCH (:KgEntity {" + _TENANT + "})-[r:KG_REL]->() CALL (r) { DELETE r" + _BATCHED,
    "MATCH (n:KgDocument {" + _TENANT + "}) CALL (n) { DETACH DELETE n" + _BATCHED,
    # concepts lose their flag; nodes nothing else uses (a relation's end among them) go
    "MATCH (n:KgEntity {" + _TENANT + "}) WHERE n.concept IS NOT NULL OR (n.label IS NULL AND n.embedding IS NULL) "
    "CALL (n) { REMOVE n.concept "
    "WITH n WHERE n.label IS NULL AND n.embedding IS NULL AND NOT (n)--() DELETE n" + _BATCHED,
    DELETE_TERMS,
    DELETE_TOTALS,
    "MATCH (n:KgName {" + _TENANT + "}) CALL (n) { DETACH DELETE n" + _BATCHED,
    DELETE_SPELLINGS,
)  # (the deletion marks stay: see deletions.py)


class Neo4jDocumentStore:
    """DocumentStore on Neo4j (see the module docstring)."""

    def __init__(self, conn: Neo4jConnection, holds_entities: bool = False) -> None:
        self.conn = conn.acquire()
        self._migrated = False
        # the entity index and the triples are on this database too: a search's read transaction
        # may read a question's seed entities as well (TxReads.entity_reads)
        self.holds_entities = holds_entities

    async def migrate(self) -> None:
        """Once per process: bring a database written by an earlier version up to date."""
        if not self._migrated:
            await migrate_documents(self.conn)
            self._migrated = True

    async def store(
        self, tenant: Tenant, records: Sequence[DocumentRecord], stamp: float | None = None
    ) -> RemovedLinks:
        """Write documents, replacing earlier versions of the same ids, in one transaction, refused
        (`DeletedSince`) when a delete came after `stamp`; returns what the replaced versions
        linked that nothing links any more."""
        await self.migrate()
        scope, rows = tenant_params(tenant), write_rows(tenant, records)
        docs = {**scope, "docs": [{"key": d["key"], "chunk_keys": d["chunk_keys"]} for d in rows["docs"]]}
        params = {**scope, "dkeys": sorted(d["key"] for d in rows["docs"])}  # each query gets only what it reads

        async def work(run: Runner) -> RemovedLinks:
            await run(LOCK_DOCS, params)
            old = await linked(run, params)
            spelt = await stored_spellings(run, params)
            await term_stats.take_away(run, tenant, params["dkeys"])
            await run(CLEAR_CHUNKS, docs)
            await run(WRITE, {**scope, **rows, "tenant": tenant_token(tenant)})
            await term_stats.adjust(run, tenant, [str(c["props"]["lexical"]).split() for c in rows["chunks"]], 1)
            await adjust_spellings(run, tenant, params, spelt, records)
            removed = await unlinked(run, tenant, params, old)
            if stamp is not None:  # last: the marks' lock is held only from here to the commit
                await deletions.check(run, tenant, [r.document.id for r in records], stamp)
            return removed

        return await self.conn.write_tx(work)

    async def delete_documents(self, tenant: Tenant, ids: Sequence[str]) -> RemovedLinks:
        """Delete documents (chunks, mentions, provenance); returns what nothing links any more."""
        params = {**tenant_params(tenant), "dkeys": keys(tenant, ids)}

        async def work(run: Runner) -> RemovedLinks:
            old = await linked(run, params)
            await term_stats.take_away(run, tenant, params["dkeys"])
            await adjust_spellings(run, tenant, params, await stored_spellings(run, params))
            await run(DELETE_DOCS, params)
            return await unlinked(run, tenant, params, old)

        return await self.conn.write_tx(work)

    async def write_stamp(self, tenant: Tenant) -> float:
        """The collection's write stamp (see DocumentStore.write_stamp)."""
        return await self.conn.read_tx(lambda run: deletions.stamp(run, tenant))

    async def note_deleted(self, tenant: Tenant, ids: Sequence[str]) -> float:
        """Mark `ids` deleted with a new stamp (see DocumentStore.note_deleted)."""
        return await self.conn.write_tx(lambda run: deletions.note(run, tenant, ids))

    async def deleted_after(self, tenant: Tenant, ids: Sequence[str], stamp: float) -> set[str]:
        """Of `ids`, those deleted after `stamp`, and COLLECTION if the collection was."""
        return await self.conn.read_tx(lambda run: deletions.deleted_after(run, tenant, ids, stamp))

    async def unsupported(self, tenant: Tenant, candidates: RemovedLinks, created: Sequence[str] = ()) -> RemovedLinks:
        """Of a refused write's relations and concepts, what nothing supports (see DocumentStore)."""
        return await self.conn.write_tx(lambda run: deletions.unsupported(run, tenant, candidates, created))

    async def claim(self, tenant: Tenant, concepts: Mapping[str, str]) -> None:
        """Flag `concepts` (IRI -> key) owned on their entity nodes, before their vectors and labels."""
        rows = [{"ekey": entity_key(tenant, iri), "iri": iri, "key": key} for iri, key in concepts.items()]
        if rows:
            await self.conn.write([(CLAIM_CONCEPTS, {**tenant_params(tenant), "rows": rows})])

    async def claimed(self, tenant: Tenant, iris: Sequence[str]) -> set[str]:
        """Of `iris`, the owned concepts."""
        ekeys = [entity_key(tenant, iri) for iri in dict.fromkeys(iris)]
        return {r["iri"] for r in await self.conn.read(OWNED_CONCEPTS, {"ekeys": ekeys})}

    async def spellings(self, tenant: Tenant, iris: Sequence[str]) -> dict[str, dict[str, int]]:
        """Of `iris`, each concept's spellings with their mentions (see spellings.py)."""
        return await read_spellings(self.conn.read, tenant, iris) if iris else {}

    async def delete_collection(self, tenant: Tenant) -> None:
        """Drop the collection's documents, chunks and provenance (in batches) and concept flags."""
        for cypher in DELETE_COLLECTION:
            await self.conn.autocommit(cypher, tenant_params(tenant))

    async def hashes(self, tenant: Tenant, ids: Sequence[str]) -> dict[str, str]:
        """Content hash of each stored document of `ids`."""
        rows = await self.conn.read(HASHES, {**tenant_params(tenant), "dkeys": keys(tenant, ids)})
        return {r["id"]: r["hash"] for r in rows}

    async def read_as_one(self, work: Callable[[ChunkReads], Awaitable[T]]) -> T:
        """`work` over this store's search reads, all in one read transaction (tx_reads.py)."""
        await self.migrate()
        return await self.conn.read_tx(lambda run: work(TxReads(run, self.holds_entities)))

    async def candidates(
        self, q: ChunkQuery, terms: Sequence[str], k: int, among: Sequence[str] | None = None,
        phrases: Sequence[str] = (),
    ) -> Candidates:  # fmt: skip
        """The `k` nearest chunks and the `k` best by BM25, with cosines (see passages.candidates),
        and with `phrases` the concepts they name (see `named`): over the whole collection one
        statement (one_read.py), over a scope or `among` one read transaction."""
        return await self.read_as_one(lambda reads: reads.candidates(q, terms, k, among, phrases))

    async def candidates_many(
        self, tenant: Tenant, questions: Sequence[tuple[Sequence[float] | None, Sequence[str]]], k: int
    ) -> list[Candidates]:
        """`candidates` for each (vector, terms): over the whole collection in one statement."""
        return await self.read_as_one(lambda reads: reads.candidates_many(tenant, questions, k))

    async def concept_keys(self, tenant: Tenant, keys: Sequence[str]) -> dict[str, list[str]]:
        """Key -> the concepts it is a key or an alias of."""
        await self.migrate()
        return await concept_keys_read(self.conn.read, tenant, keys)

    async def named(self, q: ChunkQuery, phrases: Sequence[str]) -> dict[str, tuple[str, list[Passage]]]:
        """Of `phrases`, the concept keys in the scope: key -> (concept, its subject chunks)."""
        return await self.read_as_one(lambda reads: reads.named(q, phrases))

    async def passage_links(
        self, q: ChunkQuery, chunk_ids: Sequence[str], skip: Collection[str], cap: int, known: Collection[str]
    ) -> HopLinks:
        """One graphrank hop from `chunk_ids`, in one read transaction (see passages.links)."""
        return await self.read_as_one(lambda reads: reads.passage_links(q, chunk_ids, skip, cap, known))

    async def episodes(
        self, q: ChunkQuery, entities: Sequence[str], chunk_ids: Sequence[str], window: tuple[float, float] | None
    ) -> Episodes:
        """What the chunks mention (in scope) and, with a window, each entity's episodes: the
        distinct documents in scope with a timestamp in it whose chunks mention it."""
        params = tenant_params(q.tenant)

        async def work(run: Runner) -> Episodes:
            mentioned: dict[str, list[str]] = {}
            if chunk_ids:
                for r in await run(CHUNK_LINKS, {**params, "ckeys": keys(q.tenant, chunk_ids)}):
                    mentioned.setdefault(r["chunk"], []).append(r["entity"])
            if window is None:
                return Episodes(mentioned, {})
            wanted = list(dict.fromkeys([*entities, *(e for es in mentioned.values() for e in es)]))
            ekeys = [entity_key(q.tenant, e) for e in wanted]
            rows = await run(EPISODE_COUNTS, {**params, "ekeys": ekeys, "since": window[0], "until": window[1]})
            return Episodes(mentioned, {r["entity"]: int(r["n"]) for r in rows if r["n"]})

        return await self.conn.read_tx(work)

    async def chunk_similarities(self, q: ChunkQuery, chunk_ids: Sequence[str]) -> dict[str, float]:
        """Cosine of the question's vector to the stored vector of each chunk of `chunk_ids` in scope."""
        return await self.conn.read_tx(lambda run: passages.similarities(run, q.tenant, question_vector(q), chunk_ids))

    async def chunks(self, tenant: Tenant, ids: Sequence[str]) -> list[Chunk]:
        """Chunks by id (in the scope), in the order asked."""
        return await chunks_read(self.conn.read, tenant, ids)

    async def links(
        self, q: ChunkQuery, entities: Sequence[str], chunk_ids: Sequence[str], per_entity: int
    ) -> list[Mention]:
        """Chunks mentioning `entities` (at most `per_entity` each) and the mentions of `chunk_ids`."""
        return await mention_links(self.conn.read, q.tenant, entities, chunk_ids, per_entity)

    async def relations(self, tenant: Tenant, entities: Sequence[str], limit: int) -> list[RelationHit]:
        """Relations among `entities` with their in-scope support (chunks), strongest first."""
        return await neo4j_relations.relations_among(self.conn.read, tenant, entities, limit)

    async def relations_of(self, tenant: Tenant, entities: Sequence[str], per_entity: int) -> list[RelationHit]:
        """Each entity's `per_entity` most supported relations (as subject and as object) in scope."""
        return await neo4j_relations.relations_of(self.conn, tenant, entities, per_entity)

    async def relation_contexts(
        self, tenant: Tenant, relations: Sequence[tuple[str, str, str]], per_relation: int
    ) -> dict[tuple[str, str, str], list[float]]:
        """Each relation's context: the mean vector of its first `per_relation` source chunks in scope."""
        return await neo4j_relations.relation_contexts(self.conn, tenant, relations, per_relation)

    async def relation_chunks(
        self, q: ChunkQuery, relations: Sequence[tuple[str, str, str]], per_relation: int
    ) -> list[RelationChunk]:
        """Source chunks of relations in the scope, at most `per_relation` each."""
        return await neo4j_relations.relation_chunks(self.conn, q.tenant, relations, per_relation)

    async def scoped_entities(self, tenant: Tenant) -> set[str]:
        """Entities a chunk in the (narrowing) scope mentions."""
        return await neo4j_relations.scoped_entities(self.conn, tenant)

    async def scoped_neighbours(
        self, tenant: Tenant, entities: Sequence[str], limit_per_entity: int
    ) -> list[tuple[tuple[str, str, str, int, str, str], str]]:
        """Relation edges touching `entities` with a source chunk in the scope (out-edges first)."""
        return await neo4j_relations.scoped_neighbours(self.conn, tenant, entities, limit_per_entity)

    async def documents(self, tenant: Tenant, limit: int) -> list[DocumentInfo]:
        """Documents of the scope in id order."""
        rows = await self.conn.read(DOCUMENTS, {**tenant_params(tenant), "limit": limit})
        return [
            DocumentInfo(id=r["id"], title=r["title"], chunks=r["chunks"], content_hash=r["hash"], timestamp=r["ts"])
            for r in rows
        ]

    async def counts(self, user: str) -> dict[str, DocumentCounts]:
        """Collection -> what it holds, for the user's collections that hold documents."""
        rows = await self.conn.read(COUNTS, {"user": user})
        return {r["collection"]: DocumentCounts(int(r["documents"]), int(r["chunks"])) for r in rows}

    async def close(self) -> None:
        """Release the shared driver."""
        await self.conn.release()
