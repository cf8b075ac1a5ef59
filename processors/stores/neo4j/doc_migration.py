"""Bringing a Neo4j database written by an earlier version of the document store up to date, once:
the tenant token on chunks (the full-text index requires it in every query), ABOUT links for
documents' subjects, and the kept BM25 statistics (term_stats.py) — version 3; a relation as one
KG_REL edge between its ends instead of a node and a link per source (relation_migration.py) —
version 6. Versions 4 (relation nodes lose their stored vectors) and 5 (relation nodes keyed by a
digest) changed the nodes version 6 removes: a database before 6 goes straight to it."""

from __future__ import annotations

from processors.stores.documents_protocol import tenant_token
from processors.stores.neo4j import term_stats
from processors.stores.neo4j.doc_writes import name_key
from processors.stores.neo4j.relation_migration import migrate_relations
from processors.stores.neo4j.schema import Neo4jConnection, entity_key
from processors.stores.neo4j.term_stats import DELETE_TERMS, DELETE_TOTALS
from schemas.tenant import Tenant

_BATCHED = " } IN TRANSACTIONS OF 2000 ROWS"
PAGE = 10_000
# Chunks written before the full-text index named the tenant, and documents' subjects before ABOUT.
MIGRATION_DONE = "MATCH (m:KgSchema {key: 'documents'}) WHERE m.version >= 3 RETURN 1 AS done"
MIGRATION_TENANTS = "MATCH (d:KgDocument) RETURN DISTINCT d.user AS user, d.collection AS collection"
MIGRATE_TENANT = (
    "MATCH (c:KgChunk {user: $user, collection: $collection}) WHERE c.tenant IS NULL "
    "CALL (c) { SET c.tenant = $tenant" + _BATCHED
)
MIGRATE_SUBJECTS = (
    "MATCH (d:KgDocument {user: $user, collection: $collection}) WHERE d.title_entity IS NOT NULL "
    "MATCH (e:KgEntity {key: $prefix + d.title_entity + '\"]'}) MATCH (d)-[:HAS_CHUNK]->(c:KgChunk) "
    "CALL (c, e) { MERGE (c)-[:ABOUT]->(e)" + _BATCHED
)
MIGRATION_MARK = (
    "MATCH (v:KgDocsVersion) DETACH DELETE v WITH count(*) AS gone "
    "MERGE (m:KgSchema {key: 'documents'}) SET m.version = 3"
)

MIGRATE_NAMES = (
    "MATCH (e:KgEntity {user: $user, collection: $collection}) WHERE e.concept_key IS NOT NULL "
    "CALL (e) { MERGE (n:KgName {key: $prefix + e.concept_key + '\"]'}) "
    "ON CREATE SET n.user = $user, n.collection = $collection, n.name = e.concept_key "
    "MERGE (n)-[:NAME_OF]->(e)" + _BATCHED
)
CHUNK_TERMS = (
    "MATCH (c:KgChunk {user: $user, collection: $collection}) RETURN c.lexical AS lexical "
    "ORDER BY c.key SKIP $skip LIMIT $limit"
)


async def migrate_documents(conn: Neo4jConnection) -> None:
    """Run the migration unless the database is marked done (see the module docstring)."""
    if not await conn.read(MIGRATION_DONE, {}):
        await _version_3(conn)
    await migrate_relations(conn)  # versions 4-6: relation nodes (their vectors and keys too) become edges


async def _version_3(conn: Neo4jConnection) -> None:
    """Tenant tokens, ABOUT links, names and BM25 statistics for every tenant's documents."""
    for row in await conn.read(MIGRATION_TENANTS, {}):
        tenant = Tenant(row["user"], row["collection"])
        args = {"user": tenant.user, "collection": tenant.collection, "tenant": tenant_token(tenant)}
        await conn.autocommit(MIGRATE_TENANT, args)
        prefix = entity_key(tenant, "")[:-2]  # the key of an IRI is this prefix + IRI + '"]'
        await conn.autocommit(MIGRATE_SUBJECTS, {**args, "prefix": prefix})
        await conn.autocommit(MIGRATE_NAMES, {**args, "prefix": name_key(tenant, "")[:-2]})
        await conn.autocommit(DELETE_TERMS, args)
        await conn.autocommit(DELETE_TOTALS, args)
        skip = 0
        while page := await conn.read(CHUNK_TERMS, {**args, "skip": skip, "limit": PAGE}):
            words = [str(r["lexical"] or "").split() for r in page]
            await conn.write_tx(lambda run, w=words, t=tenant: term_stats.adjust(run, t, w, 1))
            skip += PAGE
    await conn.autocommit(MIGRATION_MARK, {})
