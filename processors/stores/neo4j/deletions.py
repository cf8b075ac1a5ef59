"""A collection's deletion marks on Neo4j (see DocumentStore.note_deleted): a KgDeletion node per
deleted document and one for the whole collection (id ''), each with the stamp its delete issued
(`at`; a database of an earlier kgflow holds delete times there, also only ever growing). A lock
node of the collection (a KgDeletion with no `at`) is write-locked by every mark write and, as
its last step, by every document write that checks the marks (it rolls back if a delete came
after its stamp): a write that took the lock first commits before the delete's mark, so the
delete's data removal, which follows the mark, finds its rows; one that took it after sees the
mark. Document writes of a collection already queue for one lock near their end (the statistics
node, term_stats), so this one costs them little parallelism."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from processors.stores.documents_protocol import COLLECTION, DeletedSince, RemovedLinks
from processors.stores.neo4j.doc_writes import UNMENTIONED
from processors.stores.neo4j.relations import relation_rows
from processors.stores.neo4j.schema import Runner, entity_key, node_key
from processors.stores.neo4j.scope import keys
from schemas.tenant import Tenant

LOCK = (
    "MERGE (n:KgDeletion {key: $lock}) ON CREATE SET n.user = $user, n.collection = $collection "
    "SET n.locked = true REMOVE n.locked"
)
STAMP = "MATCH (n:KgDeletion {user: $user, collection: $collection}) RETURN coalesce(max(n.at), 0.0) AS stamp"
DROP_MARKS = "MATCH (n:KgDeletion {user: $user, collection: $collection}) WHERE n.at IS NOT NULL DELETE n"
NOTE = (
    "UNWIND $rows AS row MERGE (n:KgDeletion {key: row.key}) "
    "ON CREATE SET n.user = $user, n.collection = $collection, n.id = row.id SET n.at = $stamp"
)
AFTER = "UNWIND $keys AS k MATCH (n:KgDeletion {key: k}) WHERE n.at > $stamp RETURN n.id AS id"
# Of a refused write's relations, those no stored chunk is a source of (its own were never stored).
UNSOURCED = (
    "UNWIND $rels AS x OPTIONAL MATCH (:KgEntity {key: x.sk})-[r:KG_REL {p: x.p}]->(:KgEntity {key: x.ok}) "
    "WITH x, r WHERE r IS NULL OR size(r.src) = 0 RETURN x.s AS s, x.p AS p, x.o AS o"
)


def _params(tenant: Tenant) -> dict[str, Any]:
    return {"user": tenant.user, "collection": tenant.collection, "lock": node_key(tenant, "deletion-lock")}


def mark_keys(tenant: Tenant, ids: Sequence[str]) -> list[str]:
    """KgDeletion node keys of these ids (apart from the documents' own keys)."""
    return keys(tenant, [f"deleted:{i}" for i in ids])


async def stamp(run: Runner, tenant: Tenant) -> float:
    """The collection's write stamp: its highest mark (0 before any delete)."""
    return float((await run(STAMP, _params(tenant)))[0]["stamp"])


async def note(run: Runner, tenant: Tenant, ids: Sequence[str]) -> float:
    """Mark `ids` deleted with a new stamp, under the collection's lock; returns the stamp."""
    params = _params(tenant)
    await run(LOCK, params)
    issued = await stamp(run, tenant) + 1
    if COLLECTION in ids:  # the collection's mark outranks every document's
        await run(DROP_MARKS, params)
    ids = list(dict.fromkeys(ids))
    rows = [{"key": k, "id": i} for i, k in zip(ids, mark_keys(tenant, ids), strict=True)]
    await run(NOTE, {**params, "rows": rows, "stamp": issued})
    return issued


async def deleted_after(run: Runner, tenant: Tenant, ids: Sequence[str], since: float) -> set[str]:
    """Of `ids`, those marked after `since`, and COLLECTION if the collection was."""
    rows = await run(AFTER, {"keys": mark_keys(tenant, [*ids, COLLECTION]), "stamp": since})
    return {r["id"] for r in rows}


async def check(run: Runner, tenant: Tenant, ids: Sequence[str], since: float) -> None:
    """Lock the collection's marks for the rest of the transaction; raise DeletedSince when any of
    `ids` (or the collection) was deleted after `since`."""
    await run(LOCK, _params(tenant))
    gone = await deleted_after(run, tenant, ids, since)
    if gone:
        raise DeletedSince(gone)


async def unsupported(run: Runner, tenant: Tenant, candidates: RemovedLinks, created: Sequence[str]) -> RemovedLinks:
    """Of a refused write's relations and concepts, the relations no stored chunk is a source of and
    the concepts no chunk mentions, owned or `created` (UNMENTIONED unflags them: their claims go)."""
    scope = {"user": tenant.user, "collection": tenant.collection}
    rels = relation_rows(tenant, candidates.relations)
    found = await run(UNSOURCED, {"rels": rels}) if rels else []
    ekeys = [entity_key(tenant, iri) for iri in dict.fromkeys([*candidates.concepts, *created])]
    ents = await run(UNMENTIONED, {**scope, "ekeys": ekeys}) if ekeys else []
    return RemovedLinks(
        relations=sorted((r["s"], r["p"], r["o"]) for r in found),
        concepts=sorted(r["iri"] for r in ents if r["owned"] or r["iri"] in created),
        touched=sorted(candidates.concepts),
    )
