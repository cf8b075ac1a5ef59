"""CommunityStore on Neo4j 5 (the DRIFT spec's hierarchy; every node and relationship carries
`user` and `collection`):

    (:KgCommunity {key, id, level, parent, children, size, chunks, top_entities, top_chunks,
                   embedding, dims, membership_hash, summary, summary_model, stale})
    (:KgEntity)-[:IN_COMMUNITY {level}]->(:KgCommunity)   a member, at every level it belongs to
    (:KgChunk)-[:IN_COMMUNITY {weight}]->(:KgCommunity)
    (:KgCommunity)-[:IN_COMMUNITY]->(:KgCommunity)        child -> parent

A scope keeps the communities with a chunk of a document in scope, inside the query.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any

from processors.stores.community_graph import PAGE, Change, CommunityGraph, GraphReader, Stale, mean_vector
from processors.stores.documents_protocol import CommunityRecord
from processors.stores.neo4j.chunk_search import vector_index_query
from processors.stores.neo4j.community_update import MARK_PENDING, UNPEND_ALL, apply, read_stale
from processors.stores.neo4j.schema import Neo4jConnection, PagedQuery, Runner, entity_key, node_key, stored_vector
from processors.stores.neo4j.scope import IN_SCOPE, UNSCOPED, keys, tenant_params
from processors.stores.protocol import VECTOR_DIMENSIONS
from schemas.communities import CommunityInfo
from schemas.tenant import Tenant

_TENANT = "(c:KgCommunity {user: $user, collection: $collection})"
_INFO = (
    "{id: c.id, level: c.level, parent: c.parent, children: c.children, size: c.size, chunks: c.chunks, "
    "top_entities: c.top_entities, top_chunks: c.top_chunks, summary: c.summary, "
    "summary_model: c.summary_model, stale: c.stale}"
)
# Which communities a request sees: level, ids, and a chunk in scope.
_WHERE = (
    " WHERE ($level IS NULL OR c.level = $level) AND ($ids IS NULL OR c.id IN $ids) AND (" + UNSCOPED + " OR EXISTS "
    "{ MATCH (d:KgDocument)-[:HAS_CHUNK]->(:KgChunk)-[:IN_COMMUNITY]->(c) WHERE " + IN_SCOPE + " })"
)
LIST = "MATCH " + _TENANT + _WHERE + " RETURN " + _INFO + " AS info ORDER BY c.size DESC, c.id LIMIT $limit"
_COS = "2 * vector.similarity.cosine(c.embedding, $vec) - 1"
# Per level, the communities nearest $vec (those without a vector of its size keep the level
# listed; a zero vector, not stored, scores 0 as on SQLite).
_SIM = "CASE WHEN $zero OR c.embedding IS NULL THEN 0.0 ELSE " + _COS + " END"
# A level's communities nearest $vec: the vector index over-fetched and kept to the tenant and
# level, or (too few of them, or a scope) exactly over the level's communities in scope.
NEAREST_ANN = (
    "CALL db.index.vector.queryNodes('kg_community_embedding', $k, $vec) YIELD node AS c "
    "WITH count(*) AS total, collect(CASE WHEN c.user = $user AND c.collection = $collection AND c.level = $level "
    "THEN {info: " + _INFO + ", sim: " + _SIM + "} END) AS hits RETURN total, hits"
)
NEAREST_EXACT = (
    "MATCH " + _TENANT + _WHERE + " AND (c.dims IS NULL OR c.dims = size($vec)) WITH c, " + _SIM + " AS sim "
    "ORDER BY sim DESC, c.id LIMIT $k RETURN " + _INFO + " AS info, sim"
)
TOP_LEVEL = (
    "MATCH (c:KgCommunity) WHERE c.user = $user AND c.collection = $collection AND c.level IS NOT NULL "
    "RETURN c.level AS level ORDER BY level DESC LIMIT 1"
)
KEPT = (
    "MATCH " + _TENANT + " WHERE c.summary IS NOT NULL "
    "RETURN c.membership_hash AS hash, c.summary AS summary, c.summary_model AS model ORDER BY c.id"
)
OLD_MEMBERS = "MATCH (e:KgEntity)-[:IN_COMMUNITY]->" + _TENANT + " RETURN DISTINCT e.key AS key"
DROP = "MATCH " + _TENANT + " DETACH DELETE c"
CREATE = (
    "UNWIND $rows AS row CREATE (c:KgCommunity {key: row.key}) "
    "SET c.user = $user, c.collection = $collection, c += row.props, c.embedding = row.vec, c.stale = false"
)
HIERARCHY = (
    "UNWIND $rows AS row MATCH (c:KgCommunity {key: row.key}) "
    "MATCH (p:KgCommunity {key: row.parent}) CREATE (c)-[:IN_COMMUNITY {user: $user, collection: $collection}]->(p)"
)
MEMBERS = (
    "UNWIND $members AS row MATCH (c:KgCommunity {key: row.ckey}) "
    "MERGE (e:KgEntity {key: row.ekey}) ON CREATE SET e.user = $user, e.collection = $collection, e.uri = row.iri "
    "CREATE (e)-[:IN_COMMUNITY {user: $user, collection: $collection, level: row.level}]->(c)"
)
CHUNKS = (
    "UNWIND $chunks AS row MATCH (ch:KgChunk {key: row.chunk}) WHERE ch.user = $user AND ch.collection = $collection "
    "MATCH (c:KgCommunity {key: row.ckey}) "
    "CREATE (ch)-[:IN_COMMUNITY {user: $user, collection: $collection, weight: row.weight}]->(c)"
)
WRITE = "CALL () { " + CREATE + " } CALL () { " + MEMBERS + " } CALL () { " + CHUNKS + " }"
# Entity nodes only a membership kept (no label, vector or other link) go with it.
BARE = (
    "UNWIND $ekeys AS k MATCH (e:KgEntity {key: k}) WHERE e.user = $user AND e.collection = $collection "
    "AND e.label IS NULL AND e.embedding IS NULL AND NOT (e)--() DELETE e"
)
STALE = (
    "UNWIND $ekeys AS k MATCH (e:KgEntity {key: k})-[:IN_COMMUNITY]->(c:KgCommunity) "
    "WHERE c.user = $user AND c.collection = $collection SET c.stale = true"
)
OF_ENTITIES = (
    "UNWIND $ekeys AS k MATCH (e:KgEntity {key: k})-[m:IN_COMMUNITY]->(c:KgCommunity) "
    "WHERE m.level = $level AND c.user = $user AND c.collection = $collection RETURN e.uri AS entity, c.id AS id"
)
MEMBER_CHUNKS = (
    "UNWIND $ckeys AS k MATCH (ch:KgChunk)-[r:IN_COMMUNITY]->(c:KgCommunity {key: k}) "
    "WHERE c.user = $user AND c.collection = $collection "
    "RETURN c.id AS id, ch.id AS chunk ORDER BY id, r.weight DESC, chunk"
)
MEMBERSHIP = (
    "UNWIND $ckeys AS k MATCH (c:KgCommunity {key: k}) WHERE c.user = $user AND c.collection = $collection "
    "RETURN c.id AS id, c.membership_hash AS hash"
)
SET_SUMMARY = (
    "MATCH (c:KgCommunity {key: $key}) WHERE c.user = $user AND c.collection = $collection "
    "AND c.membership_hash = $membership SET c.summary = $summary, c.summary_model = $model"
)
# What a build reads (the only queries naming where the graph comes from); the AMONG pair keeps
# the subgraph between the entities $iris (keys $ekeys).
GRAPH_EDGES = (
    "MATCH (s:KgEntity {user: $user, collection: $collection})-[r:KG_REL]->(o:KgEntity) "
    "RETURN s.uri AS s, o.uri AS o, size(r.src) AS w"
)
GRAPH_MENTIONS = (
    "MATCH (c:KgChunk {user: $user, collection: $collection})-[m:HAS_ENTITY]->(e:KgEntity) "
    "RETURN e.uri AS entity, c.id AS chunk, m.count AS n"
)
GRAPH_EDGES_AMONG = (
    "UNWIND $ekeys AS k MATCH (s:KgEntity {key: k}) WHERE s.user = $user AND s.collection = $collection "
    "MATCH (s)-[r:KG_REL]->(o:KgEntity) WHERE o.key IN $ekeys RETURN s.uri AS s, o.uri AS o, size(r.src) AS w"
)
GRAPH_MENTIONS_AMONG = (
    "UNWIND $ekeys AS k MATCH (c:KgChunk)-[m:HAS_ENTITY]->(e:KgEntity {key: k}) "
    "WHERE c.user = $user AND c.collection = $collection RETURN e.uri AS entity, c.id AS chunk, m.count AS n"
)
CHUNK_VECTORS = (
    "UNWIND $ckeys AS k MATCH (c:KgChunk {key: k}) WHERE c.user = $user AND c.collection = $collection "
    "RETURN c.id AS id, c.embedding AS vec"
)
_BATCHED = " } IN TRANSACTIONS OF 2000 ROWS"
DELETE_COLLECTION = (
    "MATCH " + _TENANT + " CALL (c) { DETACH DELETE c" + _BATCHED,
    "MATCH (e:KgEntity {user: $user, collection: $collection}) WHERE e.label IS NULL AND e.embedding IS NULL "
    "CALL (e) { WITH e WHERE NOT (e)--() DELETE e" + _BATCHED,
    UNPEND_ALL,
)
ZERO = [0.0] * VECTOR_DIMENSIONS  # a chunk's zero vector is not stored
WRITE_PAGE = 1000  # communities written by one statement
REPLACE_ATTEMPTS = 5  # builds of one collection in several processes at once: each replace in turn


class Neo4jCommunityStore:
    """CommunityStore on Neo4j (see the module docstring)."""

    def __init__(self, conn: Neo4jConnection) -> None:
        self.conn = conn.acquire()

    async def graph(self, tenant: Tenant, entities: Sequence[str] | None = None) -> CommunityGraph:
        """Relation weights (supporting chunks) and mentions, as arrays streamed a page of records at
        a time, in one transaction; with `entities`, the relations between them and their mentions."""
        params = tenant_params(tenant)
        if entities is not None:
            params["iris"] = sorted(set(entities))
            params["ekeys"] = [entity_key(tenant, e) for e in params["iris"]]
        among = entities is not None
        reader = [GraphReader()]

        def restart() -> None:
            reader[0] = GraphReader()

        queries: list[PagedQuery] = [
            (GRAPH_EDGES_AMONG if among else GRAPH_EDGES, params, lambda rows: reader[0].edges(rows)),
            (GRAPH_MENTIONS_AMONG if among else GRAPH_MENTIONS, params, lambda rows: reader[0].mentions(rows)),
        ]
        await self.conn.read_pages(queries, PAGE, restart)
        return reader[0].graph()

    async def replace(self, tenant: Tenant, records: Iterable[CommunityRecord]) -> None:
        """Replace the collection's communities (one transaction, written a page of communities at a
        time); a record without a vector gets the mean of its `vector_chunks`' vectors; a community
        whose membership did not change keeps its summary."""
        scope = tenant_params(tenant)
        records = await asyncio.to_thread(list, records)  # made off the event loop; a retried transaction rewrites them

        async def work(run: Runner) -> None:
            kept = {r["hash"]: (r["summary"], r["model"]) for r in await run(KEPT, scope)}
            old = [r["key"] for r in await run(OLD_MEMBERS, scope)]
            await run(DROP, scope)
            await run(UNPEND_ALL, scope)
            await self._write(run, tenant, records, kept)
            await run(BARE, {**scope, "ekeys": old})

        from neo4j.exceptions import ConstraintError

        for attempt in range(REPLACE_ATTEMPTS):
            try:
                await self.conn.write_tx(work)
                return
            except ConstraintError:  # a build of the collection in another process committed first: again, after it
                if attempt + 1 == REPLACE_ATTEMPTS:
                    raise

    async def _write(
        self, run: Runner, tenant: Tenant, records: Sequence[CommunityRecord],
        kept: dict[str, tuple[str | None, str | None]],
    ) -> None:  # fmt: skip
        """Create communities a page at a time (vectors from their `vector_chunks` where they have
        none; summaries kept by membership hash), then link each to its parent."""
        scope = tenant_params(tenant)
        for at in range(0, len(records), WRITE_PAGE):
            page = records[at : at + WRITE_PAGE]
            need = keys(tenant, sorted({c for r in page if not r.vector for c in r.vector_chunks}))
            vecs = {r["id"]: r["vec"] for r in await run(CHUNK_VECTORS, {**scope, "ckeys": need})} if need else {}
            rows = _rows(tenant, page, vecs)
            for row in rows["rows"]:
                row["props"]["summary"], row["props"]["summary_model"] = kept.get(row["hash"], (None, None))
            await run(WRITE, {**scope, **rows})
        links = [{"key": node_key(tenant, r.id), "parent": node_key(tenant, r.parent)} for r in records if r.parent]
        await run(HIERARCHY, {**scope, "rows": links})  # once every page is there: parents come after children

    async def mark_stale(self, tenant: Tenant, entities: Sequence[str]) -> None:
        """Flag the communities (every level) these entities belong to; once a build has made
        communities, those of no community are pending (`KgPending`: the next update clusters them)."""
        ekeys = [entity_key(tenant, e) for e in dict.fromkeys(entities)]
        if ekeys:
            params = {**tenant_params(tenant), "ekeys": ekeys}
            await self.conn.write([(STALE, params), (MARK_PENDING, params)])

    async def stale(self, tenant: Tenant) -> Stale | None:
        """The stale level-0 communities (members, ancestors) and the pending concepts; None when
        the collection has no communities."""
        return await self.conn.read_tx(lambda run: read_stale(run, tenant))

    async def update(self, tenant: Tenant, change: Change) -> None:
        """Apply an incremental update in one transaction (neo4j/community_update.py)."""
        write = lambda run, records, kept: self._write(run, tenant, records, kept)  # noqa: E731 - the store's writer
        await self.conn.write_tx(lambda run: apply(run, tenant, change, write))

    async def list(
        self,
        tenant: Tenant,
        level: int | None = None,
        ids: Sequence[str] | None = None,
        limit: int = 1000,
    ) -> list[CommunityInfo]:
        """Communities of a level (or all), or by id, largest first; only those with a chunk in scope."""
        return await list_read(self.conn.read, tenant, level, ids, limit)

    async def search(
        self,
        tenant: Tenant,
        vector: Sequence[float],
        level: int | None,
        limit: int,
    ) -> list[CommunityInfo]:
        """Communities nearest `vector`: at `level`, else the top level first, falling back a level
        while fewer than `limit / 2` match, or every level when there is no hierarchy."""
        params = {**tenant_params(tenant), "ids": None}

        async def work(run: Runner) -> list[CommunityInfo]:
            if level is not None:
                return await _nearest(run, {**params, "level": level}, vector, limit)
            top = await run(TOP_LEVEL, params)
            picked: list[CommunityInfo] = []
            for lv in range(int(top[0]["level"]) if top else -1, -1, -1):  # the top level first, then down
                picked = await _nearest(run, {**params, "level": lv}, vector, limit)
                if len(picked) >= max(1, limit // 2):
                    break
            return picked

        return await self.conn.read_tx(work)

    async def of_entities(self, tenant: Tenant, entities: Sequence[str], level: int) -> dict[str, str]:
        """Entity -> its community at `level`."""
        return await of_entities_read(self.conn.read, tenant, entities, level)

    async def member_chunks(self, tenant: Tenant, ids: Sequence[str]) -> dict[str, list[str]]:
        """Community id -> the ids of its chunks, heaviest first."""
        params = {**tenant_params(tenant), "ckeys": keys(tenant, ids)}
        out: dict[str, list[str]] = {}
        for r in await self.conn.read(MEMBER_CHUNKS, params):
            out.setdefault(r["id"], []).append(r["chunk"])
        return out

    async def membership(self, tenant: Tenant, ids: Sequence[str]) -> dict[str, str]:
        """Community id -> membership hash."""
        params = {**tenant_params(tenant), "ckeys": keys(tenant, ids)}
        return {r["id"]: r["hash"] for r in await self.conn.read(MEMBERSHIP, params)}

    async def set_summary(self, tenant: Tenant, community: str, membership: str, summary: str, model: str) -> None:
        """Cache a summary (only if the community still has the membership it was written for)."""
        params = {**tenant_params(tenant), "key": node_key(tenant, community)}
        params |= {"membership": membership, "summary": summary, "model": model}
        await self.conn.write([(SET_SUMMARY, params)])

    async def delete_collection(self, tenant: Tenant) -> None:
        """Drop the collection's communities (in batches) and entity nodes only they kept."""
        for cypher in DELETE_COLLECTION:
            await self.conn.autocommit(cypher, tenant_params(tenant))

    async def close(self) -> None:
        """Release the shared driver."""
        await self.conn.release()


async def list_read(
    read: Runner, tenant: Tenant, level: int | None, ids: Sequence[str] | None, limit: int
) -> list[CommunityInfo]:
    """Communities of a level (or all), or by id, largest first; only those with a chunk in scope."""
    params = {**tenant_params(tenant), "level": level, "limit": limit}
    params["ids"] = None if ids is None else list(ids)
    return [CommunityInfo(**r["info"]) for r in await read(LIST, params)]


async def of_entities_read(read: Runner, tenant: Tenant, entities: Sequence[str], level: int) -> dict[str, str]:
    """Entity -> its community at `level`."""
    ekeys = [entity_key(tenant, e) for e in dict.fromkeys(entities)]
    params = {**tenant_params(tenant), "ekeys": ekeys, "level": level}
    return {r["entity"]: r["id"] for r in await read(OF_ENTITIES, params)} if ekeys else {}


def _rows(
    tenant: Tenant, records: Sequence[CommunityRecord], vectors: dict[str, list[float] | None]
) -> dict[str, list[dict[str, Any]]]:
    """UNWIND rows of the communities, their members and their chunks (`vectors`: of the chunks
    whose mean is the profile vector of a record without one)."""
    rows, members, chunks = [], [], []
    for r in records:
        key = node_key(tenant, r.id)
        vector = r.vector or mean_vector([vectors[c] or ZERO for c in r.vector_chunks if c in vectors])
        props = {"id": r.id, "level": r.level, "parent": r.parent, "children": list(r.children),
                 "size": len(r.members), "chunks": len(r.chunks), "top_entities": list(r.top_entities),
                 "top_chunks": list(r.top_chunks), "membership_hash": r.membership_hash,
                 "dims": len(vector)}  # fmt: skip
        rows.append({"key": key, "props": props, "vec": stored_vector(vector), "hash": r.membership_hash})
        members += [
            {"ckey": key, "ekey": entity_key(tenant, m), "iri": m, "level": r.level} for m in dict.fromkeys(r.members)
        ]
        chunks += [{"ckey": key, "chunk": node_key(tenant, c), "weight": float(w)} for c, w in r.chunks.items()]
    return {"rows": rows, "members": members, "chunks": chunks}


async def _nearest(run: Runner, params: dict[str, Any], vector: Sequence[float], limit: int) -> list[CommunityInfo]:
    """One level's communities nearest `vector` (see NEAREST_ANN / NEAREST_EXACT)."""
    key = lambda r: r["info"]["id"]  # noqa: E731 - ties by community id
    rows = await vector_index_query(run, params, vector, limit, NEAREST_ANN, NEAREST_EXACT, key)
    return [CommunityInfo(**r["info"], score=float(r["sim"])) for r in rows]
