"""The chunk-entity links of a neighbourhood on Neo4j (DocumentStore.links): one statement, run
on its own or as one read of a transaction (tx_reads.py: the levels of an expansion)."""

from __future__ import annotations

from collections.abc import Sequence

from processors.stores.neo4j.schema import Runner, entity_key
from processors.stores.neo4j.scope import IN_SCOPE, keys, tenant_params
from schemas.documents import Mention
from schemas.tenant import Tenant

LINKS_READ = 256  # mentions of one entity read before the most-mentioning are kept (a hub has thousands)
# Chunks mentioning each entity: of its first $read mentions in scope, the $per most mentioning.
ENTITY_LINKS = (
    "UNWIND $ekeys AS ek MATCH (e:KgEntity {key: ek}) WHERE e.user = $user AND e.collection = $collection "
    "CALL (e) { MATCH (d:KgDocument)-[:HAS_CHUNK]->(c:KgChunk)-[m:HAS_ENTITY]->(e) "
    "WHERE " + IN_SCOPE + " WITH c, m LIMIT $read "
    "RETURN c.id AS chunk, m.count AS n ORDER BY n DESC, chunk LIMIT $per } "
    "RETURN e.uri AS entity, chunk, n"
)
CHUNK_LINKS = (
    "UNWIND $ckeys AS ck MATCH (c:KgChunk {key: ck}) WHERE c.user = $user AND c.collection = $collection "
    "MATCH (d:KgDocument)-[:HAS_CHUNK]->(c) WHERE " + IN_SCOPE + " "
    "MATCH (c)-[m:HAS_ENTITY]->(e:KgEntity) RETURN e.uri AS entity, c.id AS chunk, m.count AS n ORDER BY entity"
)
# Both in one statement (an empty list of keys reads nothing), as ONE record: the async driver
# takes a message per record, and an expansion's links are thousands of rows (4,700 a question at
# 100k chunks: ~300 ms of the documents service's CPU as rows, a few ms as one list).
LINKS = "CALL () { " + ENTITY_LINKS + " UNION ALL " + CHUNK_LINKS + " } RETURN collect([entity, chunk, n]) AS links"


async def mention_links(
    run: Runner, tenant: Tenant, entities: Sequence[str], chunk_ids: Sequence[str], per_entity: int
) -> list[Mention]:
    """Chunks mentioning `entities` (at most `per_entity` each, of each one's first LINKS_READ
    mentions in scope) and the mentions of `chunk_ids` (in scope), each link once."""
    params = {**tenant_params(tenant), "per": per_entity, "read": max(per_entity, LINKS_READ)}
    params["ekeys"] = [entity_key(tenant, e) for e in dict.fromkeys(entities)]
    params["ckeys"] = keys(tenant, chunk_ids)
    (row,) = await run(LINKS, params)
    found = dict.fromkeys((e, c, int(n)) for e, c, n in row["links"])
    return [Mention(entity=e, chunk_id=c, count=n) for e, c, n in found]
