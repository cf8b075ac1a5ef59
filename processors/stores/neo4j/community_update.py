"""An incremental community update on Neo4j (processors/ingest/communities/update.py has the rule):
what it reads (`read_stale`) and how it writes (`apply`), in one transaction each, every query
kept to the tenant. Pending concepts carry the `KgPending` label. The ancestors' chunk weights
change by the removed and added children's weights, so no ancestor's chunks are read whole."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from processors.stores.community_graph import Change, CommunityRecord, Stale, mean_vector, parent_hash
from processors.stores.neo4j.schema import Runner, entity_key, node_key, stored_vector
from processors.stores.neo4j.scope import tenant_params
from processors.stores.protocol import VECTOR_DIMENSIONS
from schemas.tenant import Tenant

_C = "(c:KgCommunity {user: $user, collection: $collection})"
ANY = "MATCH " + _C + " RETURN c.id AS id LIMIT 1"
STALE = (
    "MATCH " + _C + " WHERE c.level = 0 AND c.stale = true "
    "CALL (c) { OPTIONAL MATCH (e:KgEntity)-[:IN_COMMUNITY]->(c) RETURN collect(e.uri) AS members } "
    "CALL (c) { OPTIONAL MATCH path = (c)-[:IN_COMMUNITY*]->(a:KgCommunity) WITH a, length(path) AS d ORDER BY d "
    "RETURN collect(a.id) AS ancestors } RETURN c.id AS id, members, ancestors ORDER BY id"
)
ANCESTORS = (
    "UNWIND $ckeys AS k MATCH (c:KgCommunity {key: k}) WHERE c.user = $user AND c.collection = $collection "
    "CALL (c) { OPTIONAL MATCH path = (c)-[:IN_COMMUNITY*]->(a:KgCommunity) WITH a, length(path) AS d ORDER BY d "
    "RETURN collect(a.id) AS ancestors } RETURN c.id AS id, ancestors"
)
PENDING = "MATCH (e:KgPending) WHERE e.user = $user AND e.collection = $collection RETURN e.uri AS iri ORDER BY iri"
MARK_PENDING = (
    "UNWIND $ekeys AS k MATCH (e:KgEntity {key: k}) WHERE e.user = $user AND e.collection = $collection "
    "AND NOT (e)-[:IN_COMMUNITY]->(:KgCommunity) AND EXISTS { MATCH " + _C + " } SET e:KgPending"
)
UNPEND = (
    "UNWIND $ekeys AS k MATCH (e:KgPending {key: k}) WHERE e.user = $user AND e.collection = $collection "
    "REMOVE e:KgPending"
)
UNPEND_ALL = "MATCH (e:KgPending) WHERE e.user = $user AND e.collection = $collection REMOVE e:KgPending"
KEPT = (
    "UNWIND $ckeys AS k MATCH (c:KgCommunity {key: k}) WHERE c.user = $user AND c.collection = $collection "
    "AND c.summary IS NOT NULL RETURN c.membership_hash AS hash, c.summary AS summary, c.summary_model AS model"
)
# Add (sign 1) or take away (sign -1) community `from`'s chunk weights to ancestor `to`'s.
MOVE = (
    "UNWIND $moves AS mv MATCH (r:KgCommunity {key: mv.from}) WHERE r.user = $user AND r.collection = $collection "
    "MATCH (a:KgCommunity {key: mv.to}) WHERE a.user = $user AND a.collection = $collection "
    "MATCH (ch:KgChunk)-[w:IN_COMMUNITY]->(r) MERGE (ch)-[x:IN_COMMUNITY]->(a) ON CREATE SET x.user = $user, "
    "x.collection = $collection, x.weight = 0.0 SET x.weight = x.weight + mv.sign * w.weight"
)
EMPTIED = (
    "UNWIND $akeys AS k MATCH (:KgChunk)-[x:IN_COMMUNITY]->(a:KgCommunity {key: k}) "
    "WHERE a.user = $user AND a.collection = $collection AND x.weight < 0.5 DELETE x"
)
DROP = (
    "UNWIND $ckeys AS k MATCH (c:KgCommunity {key: k}) WHERE c.user = $user AND c.collection = $collection "
    "DETACH DELETE c"
)
UNLINK = (
    "UNWIND $ekeys AS k MATCH (e:KgEntity {key: k})-[m:IN_COMMUNITY]->(c:KgCommunity) "
    "WHERE c.user = $user AND c.collection = $collection AND m.level > 0 DELETE m"
)
LINK = (
    "UNWIND $rows AS row MATCH (e:KgEntity {key: row.ekey}) WHERE e.user = $user AND e.collection = $collection "
    "MATCH (a:KgCommunity {key: row.akey}) WHERE a.user = $user AND a.collection = $collection "
    "CREATE (e)-[:IN_COMMUNITY {user: $user, collection: $collection, level: row.level}]->(a)"
)
ANCESTOR = (
    "MATCH (a:KgCommunity {key: $key}) WHERE a.user = $user AND a.collection = $collection "
    "CALL (a) { OPTIONAL MATCH (k:KgCommunity)-[:IN_COMMUNITY]->(a) WITH k ORDER BY k.size DESC, k.id "
    "RETURN collect(k.id) AS children, collect(k.membership_hash) AS hashes, collect(k.top_entities) AS tops } "
    "CALL (a) { OPTIONAL MATCH (:KgEntity)-[m:IN_COMMUNITY]->(a) RETURN count(m) AS size } "
    "CALL (a) { OPTIONAL MATCH (:KgChunk)-[w:IN_COMMUNITY]->(a) RETURN count(w) AS chunks } "
    "CALL (a) { OPTIONAL MATCH (ch:KgChunk)-[w:IN_COMMUNITY]->(a) WITH ch, w ORDER BY w.weight DESC, ch.id "
    "LIMIT $heavy RETURN collect(ch.id) AS heavy, collect(coalesce(ch.embedding, [])) AS vecs } "
    "RETURN a.level AS level, a.top_entities AS own, children, hashes, tops, size, chunks, heavy, vecs"
)
STILL = (
    "UNWIND $ekeys AS k MATCH (e:KgEntity {key: k})-[:IN_COMMUNITY]->(a:KgCommunity {key: $key}) "
    "WHERE a.user = $user AND a.collection = $collection RETURN e.uri AS iri"
)
REFRESH = (
    "MATCH (a:KgCommunity {key: $key}) WHERE a.user = $user AND a.collection = $collection "
    "SET a += $props, a.embedding = $vec, a.summary = null, a.summary_model = null, a.stale = false"
)
TOP_ENTITIES, TOP_CHUNKS, VECTOR_CHUNKS = 10, 5, 10
ZERO = [0.0] * VECTOR_DIMENSIONS
Write = Callable[[Runner, Sequence[CommunityRecord], dict[str, tuple[str | None, str | None]]], Awaitable[None]]


async def read_stale(run: Runner, tenant: Tenant) -> Stale | None:
    """The stale level-0 communities with their members and ancestors, and the pending concepts."""
    scope = tenant_params(tenant)
    if not await run(ANY, scope):
        return None
    rows = await run(STALE, scope)
    return Stale({r["id"]: sorted(r["members"]) for r in rows}, {r["id"]: list(r["ancestors"]) for r in rows},
                 [r["iri"] for r in await run(PENDING, scope)])  # fmt: skip


async def apply(run: Runner, tenant: Tenant, change: Change, write: Write) -> None:
    """Write an update (see the module docstring); `write` writes new communities."""
    scope = tenant_params(tenant)
    gone = [node_key(tenant, c) for c in change.removed]
    old = {r["id"]: list(r["ancestors"]) for r in await run(ANCESTORS, {**scope, "ckeys": gone})}
    kept = {r["hash"]: (r["summary"], r["model"]) for r in await run(KEPT, {**scope, "ckeys": gone})}
    await run(MOVE, {**scope, "moves": _moves(tenant, old, -1.0)})
    await run(DROP, {**scope, "ckeys": gone})
    await write(run, change.added, kept)
    new = {r.id: change.ancestors.get(r.members[0], []) if r.members else [] for r in change.added}
    await run(MOVE, {**scope, "moves": _moves(tenant, new, 1.0)})
    ekeys = [entity_key(tenant, e) for e in sorted(change.ancestors)]
    await run(UNLINK, {**scope, "ekeys": ekeys})
    links = [{"ekey": entity_key(tenant, e), "akey": node_key(tenant, a), "level": level}
             for e, chain in change.ancestors.items() for level, a in enumerate(chain, 1)]  # fmt: skip
    await run(LINK, {**scope, "rows": links})
    touched = sorted({a for chain in [*old.values(), *new.values()] for a in chain})
    await run(EMPTIED, {**scope, "akeys": [node_key(tenant, a) for a in touched]})
    levels = {a: i for chain in [*old.values(), *new.values()] for i, a in enumerate(chain)}
    for a in sorted(touched, key=lambda a: levels[a]):  # children before parents
        await _refresh(run, tenant, a)
    await run(UNPEND, {**scope, "ekeys": ekeys})


def _moves(tenant: Tenant, chains: dict[str, list[str]], sign: float) -> list[dict[str, Any]]:
    return [{"from": node_key(tenant, c), "to": node_key(tenant, a), "sign": sign}
            for c, chain in chains.items() for a in chain]  # fmt: skip


async def _refresh(run: Runner, tenant: Tenant, cid: str) -> None:
    """An ancestor's children, counts, profile and membership hash after its descendants changed."""
    scope, key = tenant_params(tenant), node_key(tenant, cid)
    rows = await run(ANCESTOR, {**scope, "key": key, "heavy": VECTOR_CHUNKS})
    if not rows:
        return
    r = rows[0]
    candidates = list(dict.fromkeys([*(r["own"] or []), *(e for tops in r["tops"] for e in tops or [])]))
    still = {x["iri"] for x in await run(STILL, {**scope, "key": key,
                                                  "ekeys": [entity_key(tenant, e) for e in candidates]})}  # fmt: skip
    vector = mean_vector([v or ZERO for v in r["vecs"]])
    props = {"children": sorted(r["children"]), "size": r["size"], "chunks": r["chunks"], "dims": len(vector),
             "top_entities": [e for e in candidates if e in still][:TOP_ENTITIES],
             "top_chunks": r["heavy"][:TOP_CHUNKS], "membership_hash": parent_hash(r["hashes"])}  # fmt: skip
    await run(REFRESH, {**scope, "key": key, "props": props, "vec": stored_vector(vector)})
