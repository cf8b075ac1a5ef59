"""Version 6 of the document store's migration (doc_migration.py): a relation stored as a
`KgRelation {key, s, p, o}` node with a `SOURCE_OF` link from each source chunk becomes one
`KG_REL {p, src}` edge between its ends' entity nodes (relations.py). Chunks first get their
number (`KgChunk.n`, doc_writes.chunk_number), a page of chunks per transaction in key order; then
each page of relations becomes edges in one transaction and its nodes go, so a database of any
size migrates in bounded memory, and a migration cut short resumes where it stopped (an edge met
again only gains the numbers it lacks). The relations' three indexes are dropped by the schema."""

from __future__ import annotations

import logging
import time

from processors.stores.neo4j.doc_writes import chunk_number
from processors.stores.neo4j.schema import Neo4jConnection, entity_key
from schemas.tenant import Tenant

PAGE = 10_000
log = logging.getLogger(__name__)
DONE = "MATCH (m:KgSchema {key: 'documents'}) WHERE m.version >= 6 RETURN 1 AS done"
MARK = "MERGE (m:KgSchema {key: 'documents'}) SET m.version = 6"
# Chunks after $after in key order (the key's unique index gives the order: no page rescans).
CHUNK_KEYS = "MATCH (c:KgChunk) WHERE c.key > $after RETURN c.key AS key, c.n AS n ORDER BY c.key LIMIT $limit"
# Is there anything written before version 6: a relation node, or a chunk without its number?
OLD_DATA = (
    "CALL () { MATCH (:KgRelation) RETURN 1 AS old LIMIT 1 "
    "UNION MATCH (c:KgChunk) WHERE c.n IS NULL RETURN 1 AS old LIMIT 1 } RETURN old LIMIT 1"
)
NUMBER_CHUNKS = "UNWIND $rows AS row MATCH (c:KgChunk {key: row.key}) SET c.n = row.n"
# A page of relation nodes (each page's nodes are deleted, so the next read finds the next ones).
OLD_RELATIONS = (
    "MATCH (r:KgRelation) RETURN elementId(r) AS id, r.user AS user, r.collection AS collection, "
    "r.s AS s, r.p AS p, r.o AS o LIMIT $limit"
)
# Each relation node as an edge carrying its source chunks' numbers; an end a source chunk does
# not mention gets a REL_END link from it (how the chunk's take-back finds the edge: doc_writes).
TO_EDGES = (
    "UNWIND $rows AS row MATCH (r:KgRelation) WHERE elementId(r) = row.id "
    "CALL (r, row) { MATCH (c:KgChunk)-[:SOURCE_OF]->(r) WITH row, collect(c) AS cs WHERE size(cs) > 0 "
    "MERGE (s:KgEntity {key: row.sk}) ON CREATE SET s.user = row.user, s.collection = row.collection, s.uri = row.s "
    "MERGE (o:KgEntity {key: row.ok}) ON CREATE SET o.user = row.user, o.collection = row.collection, o.uri = row.o "
    "MERGE (s)-[x:KG_REL {p: row.p}]->(o) WITH s, o, x, cs, [c IN cs | c.n] AS src "
    "SET x.src = coalesce(x.src, []) + [n IN src WHERE NOT n IN coalesce(x.src, [])] "
    "WITH s, o, cs UNWIND cs AS c UNWIND CASE WHEN s = o THEN [s] ELSE [s, o] END AS e "
    "WITH c, e WHERE NOT (c)-[:HAS_ENTITY|REL_END]->(e) MERGE (c)-[:REL_END]->(e) } "
    "DETACH DELETE r"
)


async def migrate_relations(conn: Neo4jConnection) -> None:
    """Run version 6 unless the database is marked done (see the module docstring)."""
    if await conn.read(DONE, {}):
        return
    if await conn.read(OLD_DATA, {}):  # a new database has nothing to convert: no word of it
        # A large database takes hours (about 1,250 relations/s measured): say so, and how far it is.
        log.warning("document store migration 6: relations become edges; the store answers once it ends")
    began, converted = time.monotonic(), 0
    await number_chunks(conn)
    while page := await conn.read(OLD_RELATIONS, {"limit": PAGE}):
        rows = []
        for r in page:
            tenant = Tenant(r["user"], r["collection"])
            rows.append({**r, "sk": entity_key(tenant, r["s"]), "ok": entity_key(tenant, r["o"])})
        await conn.write([(TO_EDGES, {"rows": rows})])
        converted += len(rows)
        rate = converted / max(time.monotonic() - began, 1e-3)
        log.warning("document store migration 6: %d relations converted (%.0f/s)", converted, rate)
    await conn.autocommit(MARK, {})


async def number_chunks(conn: Neo4jConnection) -> None:
    """Give every chunk without one its number, a page at a time."""
    after = ""
    while page := await conn.read(CHUNK_KEYS, {"after": after, "limit": PAGE}):
        rows = [{"key": r["key"], "n": chunk_number(r["key"])} for r in page if r["n"] is None]
        if rows:
            await conn.write([(NUMBER_CHUNKS, {"rows": rows})])
        after = page[-1]["key"]
