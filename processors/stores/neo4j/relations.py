"""Relation reads of the Neo4j document store: the relations of entities (what relation search
scores by its ends' entity vectors), source chunks of relations, and the entities and relation
edges a scope reaches, every query scoped by tenant and scope (neo4j_scope)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from processors.stores.documents_protocol import RelationChunk, RelationHit
from processors.stores.neo4j.schema import Neo4jConnection, Runner, relation_key
from processors.stores.neo4j.scope import IN_SCOPE, SCOPE_DOCS, tenant_params
from schemas.tenant import Tenant

RawEdge = tuple[str, str, str, int, str, str]  # (s, p, o, literal?, datatype, language)
Triple = tuple[str, str, str]

# Does relation r have a source chunk of a document in scope?
_SOURCED = "EXISTS { MATCH (d:KgDocument)-[:HAS_CHUNK]->(:KgChunk)-[:SOURCE_OF]->(r) WHERE " + IN_SCOPE + " }"
# Its source chunks in scope (as SQLite's count(DISTINCT chunk_id) over the scope's sources).
_SUPPORT = "COUNT { MATCH (d:KgDocument)-[:HAS_CHUNK]->(:KgChunk)-[:SOURCE_OF]->(r) WHERE " + IN_SCOPE + " }"
# Relations among the entities with their source chunks in scope, most supported first.
RELATIONS_AMONG = (
    "UNWIND $entities AS s MATCH (r:KgRelation {user: $user, collection: $collection, s: s}) "
    "WHERE r.o IN $entities MATCH (d:KgDocument)-[:HAS_CHUNK]->(c:KgChunk)-[:SOURCE_OF]->(r) WHERE " + IN_SCOPE + " "
    "WITH r, count(DISTINCT c) AS w RETURN r.s AS s, r.p AS p, r.o AS o, w ORDER BY w DESC, s, o, p LIMIT $limit"
)
# Each entity's relations as subject and as object with a source in scope, most supported first.
RELATIONS_OF = (
    "UNWIND $entities AS e CALL (e) { "
    "MATCH (r:KgRelation {user: $user, collection: $collection, s: e}) WITH r, " + _SUPPORT + " AS w WHERE w > 0 "
    "RETURN r, w ORDER BY w DESC, r.p, r.o LIMIT $lim UNION ALL "
    "MATCH (r:KgRelation {user: $user, collection: $collection, o: e}) WITH r, " + _SUPPORT + " AS w WHERE w > 0 "
    "RETURN r, w ORDER BY w DESC, r.p, r.s LIMIT $lim } RETURN DISTINCT r.s AS s, r.p AS p, r.o AS o, w"
)
RELATION_CHUNKS = (
    "UNWIND $rkeys AS k MATCH (r:KgRelation {key: k}) WHERE r.user = $user AND r.collection = $collection "
    "CALL (r) { MATCH (d:KgDocument)-[:HAS_CHUNK]->(c:KgChunk)-[:SOURCE_OF]->(r) WHERE " + IN_SCOPE + " "
    "RETURN c.id AS chunk ORDER BY chunk LIMIT $per } RETURN r.s AS s, r.p AS p, r.o AS o, chunk"
)
RELATION_CONTEXT = (
    "UNWIND $rkeys AS k MATCH (r:KgRelation {key: k}) WHERE r.user = $user AND r.collection = $collection "
    "CALL (r) { MATCH (d:KgDocument)-[:HAS_CHUNK]->(c:KgChunk)-[:SOURCE_OF]->(r) WHERE " + IN_SCOPE + " "
    "RETURN c.embedding AS vec ORDER BY c.id LIMIT $per } RETURN r.s AS s, r.p AS p, r.o AS o, vec"
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


async def relations_of(
    conn: Neo4jConnection, tenant: Tenant, entities: Sequence[str], per_entity: int
) -> list[RelationHit]:
    """Relations with an end among `entities` and a source in scope (see `RELATIONS_OF`)."""
    frontier = list(dict.fromkeys(entities))
    if not frontier:
        return []
    params = {**tenant_params(tenant), "entities": frontier, "lim": per_entity}
    rows = await conn.read(RELATIONS_OF, params)
    return [RelationHit(r["s"], r["p"], r["o"], support=int(r["w"])) for r in rows]


async def relation_chunks(
    conn: Neo4jConnection,
    tenant: Tenant,
    relations: Sequence[Triple],
    per_relation: int,
) -> list[RelationChunk]:
    """The first `per_relation` source chunks (by id) of each relation in scope."""
    rkeys = [relation_key(tenant, *r) for r in dict.fromkeys(tuple(r) for r in relations)]
    if not rkeys:
        return []
    params = {**tenant_params(tenant), "rkeys": rkeys, "per": per_relation}
    return [RelationChunk((r["s"], r["p"], r["o"]), r["chunk"]) for r in await conn.read(RELATION_CHUNKS, params)]


async def relation_contexts(
    conn: Neo4jConnection, tenant: Tenant, relations: Sequence[Triple], per_relation: int
) -> dict[Triple, list[float]]:
    """Each relation's context: the mean vector of its first `per_relation` source chunks in scope."""
    rkeys = [relation_key(tenant, *r) for r in dict.fromkeys(tuple(r) for r in relations)]
    if not rkeys:
        return {}
    params = {**tenant_params(tenant), "rkeys": rkeys, "per": per_relation}
    vecs: dict[Triple, list[list[float]]] = {}
    for r in await conn.read(RELATION_CONTEXT, params):
        if r["vec"] is not None:
            vecs.setdefault((r["s"], r["p"], r["o"]), []).append(r["vec"])
    return {k: np.mean(np.asarray(vs, dtype=np.float32), axis=0).tolist() for k, vs in vecs.items()}


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


async def relations_among(read: Runner, tenant: Tenant, entities: Sequence[str], limit: int) -> list[RelationHit]:
    """Relations among `entities` with their in-scope support (chunks), strongest first."""
    params = {**tenant_params(tenant), "entities": list(dict.fromkeys(entities)), "limit": limit}
    return [RelationHit(r["s"], r["p"], r["o"], int(r["w"])) for r in await read(RELATIONS_AMONG, params)]
