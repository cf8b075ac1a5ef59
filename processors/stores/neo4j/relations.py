"""Relation reads of the Neo4j document store: relation search (KgRelation.embedding, the
first vector a relation was stored with), source chunks of relations, and the entities and
relation edges a scope reaches, every query scoped by tenant and scope (neo4j_scope)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from processors.stores.documents_protocol import RelationChunk, RelationHit
from processors.stores.neo4j.chunk_search import vector_index_query
from processors.stores.neo4j.schema import Neo4jConnection, node_key
from processors.stores.neo4j.scope import IN_SCOPE, SCOPE_DOCS, UNSCOPED, tenant_params
from schemas.tenant import Tenant

RawEdge = tuple[str, str, str, int, str, str]  # (s, p, o, literal?, datatype, language)
Triple = tuple[str, str, str]

# Does relation r have a source chunk of a document in scope?
_SOURCED = "EXISTS { MATCH (d:KgDocument)-[:HAS_CHUNK]->(:KgChunk)-[:SOURCE_OF]->(r) WHERE " + IN_SCOPE + " }"
_SUPPORT = "COUNT { (:KgChunk)-[:SOURCE_OF]->(r) }"  # every source chunk, as SQLite reports it
_COS = "CASE WHEN $zero THEN 0.0 ELSE 2 * vector.similarity.cosine(r.embedding, $vec) - 1 END"
RELATIONS_ANN = (
    "CALL db.index.vector.queryNodes('kg_relation_embedding', $k, $vec) YIELD node AS r "
    "WITH count(*) AS total, collect(CASE WHEN r.user = $user AND r.collection = $collection "
    "THEN {s: r.s, p: r.p, o: r.o, sim: " + _COS + ", n: " + _SUPPORT + "} END) AS hits RETURN total, hits"
)
RELATIONS_EXACT = (
    "MATCH (r:KgRelation {user: $user, collection: $collection}) WHERE r.embedding IS NOT NULL "
    "AND (" + UNSCOPED + " OR " + _SOURCED + ") WITH r, " + _COS + " AS sim ORDER BY sim DESC, r.s, r.p, r.o "
    "LIMIT $k RETURN r.s AS s, r.p AS p, r.o AS o, sim, " + _SUPPORT + " AS n"
)
RELATION_CHUNKS = (
    "UNWIND $rkeys AS k MATCH (r:KgRelation {key: k}) WHERE r.user = $user AND r.collection = $collection "
    "CALL (r) { MATCH (d:KgDocument)-[:HAS_CHUNK]->(c:KgChunk)-[:SOURCE_OF]->(r) WHERE " + IN_SCOPE + " "
    "RETURN c.id AS chunk ORDER BY chunk LIMIT $per } RETURN r.s AS s, r.p AS p, r.o AS o, chunk"
)
SCOPED_ENTITIES = (
    SCOPE_DOCS + " MATCH (d)-[:HAS_CHUNK]->(:KgChunk)-[:HAS_ENTITY]->(e:KgEntity) RETURN DISTINCT e.uri AS iri"
)
# Each entity's relation edges with a source in scope: out-edges by (p, o), in-edges by (p, s).
SCOPED_NEIGHBOURS = (
    "UNWIND range(0, size($entities) - 1) AS i WITH i, $entities[i] AS e CALL (e) { "
    "MATCH (r:KgRelation {user: $user, collection: $collection, s: e}) WHERE " + _SOURCED + " "
    "RETURN 0 AS dir, r.s AS s, r.p AS p, r.o AS o ORDER BY p, o LIMIT $lim UNION ALL "
    "MATCH (r:KgRelation {user: $user, collection: $collection, o: e}) WHERE " + _SOURCED + " "
    "RETURN 1 AS dir, r.s AS s, r.p AS p, r.o AS o ORDER BY p, s LIMIT $lim } RETURN i, dir, s, p, o"
)


async def search_relations(
    conn: Neo4jConnection, tenant: Tenant, vector: Sequence[float], limit: int
) -> list[RelationHit]:
    """Relations nearest `vector` (with their cosine) with a source chunk in the scope."""

    async def work(run: Any) -> list[dict[str, Any]]:
        params = tenant_params(tenant)
        return await vector_index_query(run, params, vector, limit, RELATIONS_ANN, RELATIONS_EXACT, _spo)

    hits = await conn.read_tx(work)
    return [RelationHit(r["s"], r["p"], r["o"], support=int(r["n"]), score=float(r["sim"])) for r in hits]


async def relation_chunks(
    conn: Neo4jConnection,
    tenant: Tenant,
    relations: Sequence[Triple],
    per_relation: int,
) -> list[RelationChunk]:
    """The first `per_relation` source chunks (by id) of each relation in scope."""
    rkeys = [node_key(tenant, *r) for r in dict.fromkeys(tuple(r) for r in relations)]
    if not rkeys:
        return []
    params = {**tenant_params(tenant), "rkeys": rkeys, "per": per_relation}
    return [RelationChunk((r["s"], r["p"], r["o"]), r["chunk"]) for r in await conn.read(RELATION_CHUNKS, params)]


async def scoped_entities(conn: Neo4jConnection, tenant: Tenant) -> set[str]:
    """Entities a chunk in the tenant's (narrowing) scope mentions."""
    if tenant.scope is None or tenant.scope.is_empty:
        raise ValueError("scoped_entities needs a scope that narrows")
    return {r["iri"] for r in await conn.read(SCOPED_ENTITIES, tenant_params(tenant))}


async def scoped_neighbours(
    conn: Neo4jConnection, tenant: Tenant, entities: Sequence[str], limit_per_entity: int
) -> list[tuple[RawEdge, str]]:
    """Relation edges touching `entities` with a source chunk in the scope, as (raw edge, entity
    found from): out-edges first, each entity's first `limit_per_entity` in key order."""
    frontier = list(dict.fromkeys(entities))
    if tenant.scope is None or tenant.scope.is_empty or not frontier:
        return []  # as SQLite: a scope that does not narrow reaches no edge here
    params = {**tenant_params(tenant), "entities": frontier, "lim": limit_per_entity}
    rows = await conn.read(SCOPED_NEIGHBOURS, params)
    rows.sort(key=lambda r: (r["dir"], r["i"]))  # stable: each entity's edges stay in key order
    return [((r["s"], r["p"], r["o"], 0, "", ""), frontier[r["i"]]) for r in rows]


def _spo(r: dict[str, Any]) -> Triple:
    return (r["s"], r["p"], r["o"])
