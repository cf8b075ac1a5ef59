"""Relation reads of the Neo4j document store: the relations of entities (what relation search
scores by its ends' entity vectors), source chunks of relations, and the entities and relation
edges a scope reaches, every query scoped by tenant and scope (neo4j_scope).

A relation is one edge between its ends' entity nodes, `(:KgEntity)-[:KG_REL {p, src}]->(:KgEntity)`,
`src` the numbers (`KgChunk.n`, doc_writes.chunk_number) of its source chunks. A number is 63 bits
of a digest and could name a chunk of another tenant too: a source chunk is always matched by its
number AND the request's tenant. Entities are reached by their keys, which name the tenant."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from processors.stores.documents_protocol import RelationChunk, RelationHit
from processors.stores.neo4j.schema import Neo4jConnection, Runner, entity_key, rows_of
from processors.stores.neo4j.scope import IN_SCOPE, SCOPE_DOCS, tenant_params
from schemas.tenant import Tenant

RawEdge = tuple[str, str, str, int, str, str]  # (s, p, o, literal?, datatype, language)
Triple = tuple[str, str, str]

# Relation r's source chunks in the request's tenant and scope, bound to `c` (and their document `d`).
SOURCES_IN_SCOPE = (
    "UNWIND r.src AS n MATCH (c:KgChunk {n: n}) USING INDEX c:KgChunk(n) "
    "WHERE c.user = $user AND c.collection = $collection "
    "MATCH (d:KgDocument)-[:HAS_CHUNK]->(c) WHERE " + IN_SCOPE
)
# Does relation r have a source chunk of a document in scope?
_SOURCED = "EXISTS { " + SOURCES_IN_SCOPE + " }"
# Its source chunks in scope (as SQLite's count(DISTINCT chunk_id) over the scope's sources); with
# no scope, all of them: `src` holds each stored source chunk once (doc_writes keeps it so).
_SUPPORT = {False: "size(r.src)", True: "COUNT { " + SOURCES_IN_SCOPE + " }"}
_ENTITY = "MATCH (e:KgEntity {key: ek}) WHERE e.user = $user AND e.collection = $collection "
# Relations among the entities with their source chunks in scope, most supported first.
RELATIONS_AMONG = {
    scoped: "UNWIND $ekeys AS ek " + _ENTITY + "MATCH (e)-[r:KG_REL]->(o:KgEntity) WHERE o.key IN $ekeys "
    "WITH e, r, o, " + _SUPPORT[scoped] + " AS w WHERE w > 0 "
    "WITH e.uri AS s, r.p AS p, o.uri AS o, w ORDER BY w DESC, s, o, p LIMIT $limit "
    "RETURN collect({s: s, p: p, o: o, w: w}) AS rows"
    for scoped in (False, True)
}
# Each entity's relations as subject and as object with a source in scope, most supported first.
RELATIONS_OF = {
    scoped: "UNWIND $ekeys AS ek " + _ENTITY + "CALL (e) { "
    "MATCH (e)-[r:KG_REL]->(o:KgEntity) WITH e AS s, r, o, " + _SUPPORT[scoped] + " AS w WHERE w > 0 "
    "RETURN s, r, o, w ORDER BY w DESC, r.p, o.uri LIMIT $lim UNION ALL "
    "MATCH (s:KgEntity)-[r:KG_REL]->(e) WITH s, r, e AS o, " + _SUPPORT[scoped] + " AS w WHERE w > 0 "
    "RETURN s, r, o, w ORDER BY w DESC, r.p, s.uri LIMIT $lim } "
    "RETURN DISTINCT s.uri AS s, r.p AS p, o.uri AS o, w"
    for scoped in (False, True)
}
# The relations of $rels (rows of relation_rows), each bound to `r` with its row `x`.
_RELATIONS = (
    "UNWIND $rels AS x MATCH (s:KgEntity {key: x.sk}) WHERE s.user = $user AND s.collection = $collection "
    "MATCH (s)-[r:KG_REL {p: x.p}]->(:KgEntity {key: x.ok}) "
)
RELATION_CHUNKS = (
    _RELATIONS + "CALL (r) { " + SOURCES_IN_SCOPE + " RETURN c.id AS chunk ORDER BY chunk LIMIT $per } "
    "RETURN x.s AS s, x.p AS p, x.o AS o, chunk"
)
RELATION_CONTEXT = (
    _RELATIONS + "CALL (r) { " + SOURCES_IN_SCOPE + " RETURN c.embedding AS vec ORDER BY c.id LIMIT $per } "
    "RETURN x.s AS s, x.p AS p, x.o AS o, vec"
)
SCOPED_ENTITIES = (
    SCOPE_DOCS + " MATCH (d)-[:HAS_CHUNK]->(:KgChunk)-[:HAS_ENTITY]->(e:KgEntity) RETURN DISTINCT e.uri AS iri"
)
# Each entity's relation edges with a source in scope: out-edges by (p, o), in-edges by (p, s).
SCOPED_NEIGHBOURS = (
    "UNWIND range(0, size($ekeys) - 1) AS i WITH i, $ekeys[i] AS ek " + _ENTITY + "CALL (e) { "
    "MATCH (e)-[r:KG_REL]->(o:KgEntity) WHERE " + _SOURCED + " "
    "RETURN 0 AS dir, e.uri AS s, r.p AS p, o.uri AS o ORDER BY p, o LIMIT $lim UNION ALL "
    "MATCH (s:KgEntity)-[r:KG_REL]->(e) WHERE " + _SOURCED + " "
    "RETURN 1 AS dir, s.uri AS s, r.p AS p, e.uri AS o ORDER BY p, s LIMIT $lim } RETURN i, dir, s, p, o"
)


def relation_rows(tenant: Tenant, relations: Sequence[Triple]) -> list[dict[str, str]]:
    """Each relation once as a query row: its triple and its ends' entity keys."""
    return [{"s": s, "p": p, "o": o, "sk": entity_key(tenant, s), "ok": entity_key(tenant, o)}
            for s, p, o in dict.fromkeys(tuple(r) for r in relations)]  # fmt: skip


def _entity_params(tenant: Tenant, entities: Sequence[str]) -> tuple[dict[str, Any], bool]:
    """Tenant and scope parameters with the entities' keys (each once), and whether the scope narrows."""
    params = tenant_params(tenant)
    params["ekeys"] = [entity_key(tenant, e) for e in dict.fromkeys(entities)]
    return params, params["doc_ids"] is not None or params["meta"] is not None


async def relations_of(
    conn: Neo4jConnection, tenant: Tenant, entities: Sequence[str], per_entity: int
) -> list[RelationHit]:
    """Relations with an end among `entities` and a source in scope (see `RELATIONS_OF`)."""
    if not entities:
        return []
    params, scoped = _entity_params(tenant, entities)
    rows = await conn.read(RELATIONS_OF[scoped], {**params, "lim": per_entity})
    return [RelationHit(r["s"], r["p"], r["o"], support=int(r["w"])) for r in rows]


async def relation_chunks(
    conn: Neo4jConnection,
    tenant: Tenant,
    relations: Sequence[Triple],
    per_relation: int,
) -> list[RelationChunk]:
    """The first `per_relation` source chunks (by id) of each relation in scope."""
    rels = relation_rows(tenant, relations)
    if not rels:
        return []
    params = {**tenant_params(tenant), "rels": rels, "per": per_relation}
    return [RelationChunk((r["s"], r["p"], r["o"]), r["chunk"]) for r in await conn.read(RELATION_CHUNKS, params)]


async def relation_contexts(
    conn: Neo4jConnection, tenant: Tenant, relations: Sequence[Triple], per_relation: int
) -> dict[Triple, list[float]]:
    """Each relation's context: the mean vector of its first `per_relation` source chunks in scope."""
    rels = relation_rows(tenant, relations)
    if not rels:
        return {}
    params = {**tenant_params(tenant), "rels": rels, "per": per_relation}
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
    params, _ = _entity_params(tenant, frontier)
    rows = await conn.read(SCOPED_NEIGHBOURS, {**params, "lim": limit_per_entity})
    rows.sort(key=lambda r: (r["dir"], r["i"]))  # stable: each entity's edges stay in key order
    return [((r["s"], r["p"], r["o"], 0, "", ""), frontier[r["i"]]) for r in rows]


async def relations_among(read: Runner, tenant: Tenant, entities: Sequence[str], limit: int) -> list[RelationHit]:
    """Relations among `entities` with their in-scope support (chunks), strongest first."""
    params, scoped = _entity_params(tenant, entities)
    rows = rows_of(await read(RELATIONS_AMONG[scoped], {**params, "limit": limit}))
    return [RelationHit(r["s"], r["p"], r["o"], int(r["w"])) for r in rows]  # collected in the query's order
