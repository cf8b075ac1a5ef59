"""The entity reads a question's seeds take on Neo4j, over any `Runner`: the entity index's search
(Neo4jEntityIndex.search), labels, the collection's load state and the concepts documents named.
Run by their stores one query each, or all inside a document search's read transaction
(`TxEntityReads`: issue 38, a lazy-rag question's candidates and seeds in one round trip).

The vector index is global, so a query over-fetches (`ANN_OVERFETCH` x limit candidates, a second
time wider) and keeps the tenant's nodes; when that leaves fewer than `limit` hits and the index
may hold more, an exact scan of the tenant's nodes (`vector.similarity.cosine`) answers instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from processors.algorithms.entities import rank_entity_hits
from processors.algorithms.text_match import content_tokens, label_match_score
from processors.stores.neo4j.cypher import ANN, EXACT, GET_LOAD, LABELS, SEARCH
from processors.stores.neo4j.doc_writes import name_key
from processors.stores.neo4j.schema import (
    CypherVector,
    Runner,
    collection_key,
    entity_key,
    lucene_phrase,
    rows_of,
    stored_vector,
)
from processors.stores.neo4j.scope import tenant_params
from processors.stores.protocol import EntityHit, LoadState
from schemas.tenant import Tenant

LEXICAL_CANDIDATES = 200
# index candidates per wanted hit: first try, then the over-fetch before an exact tenant scan
# (a lone tenant is answered by the first: k = 500 costs 20 ms of server time, k = 100 8 ms)
ANN_OVERFETCH = (2, 10)
ANN_MIN_K = 100
ANN_MAX_K = 10_000
CONCEPT_NAMES = (
    "UNWIND $names AS nk MATCH (n:KgName {key: nk})-[:NAME_OF]->(e:KgEntity) "
    "WHERE n.user = $user AND n.collection = $collection RETURN n.name AS name, collect(e.uri) AS iris"
)


async def entity_search(
    read: Runner, tenant: Tenant, vector: Sequence[float] | None, text: str | None, limit: int
) -> list[EntityHit]:
    """Lexical whole-label hits first (longer labels first), then nearest entities by cosine."""
    if limit <= 0:
        return []
    scope = {"user": tenant.user, "collection": tenant.collection}
    toks = content_tokens(text) if text else []
    vec = stored_vector(vector) if vector is not None else None
    k = _ann_k(limit, ANN_OVERFETCH[0])
    q = " OR ".join(lucene_phrase(t) for t in toks) or None
    params = {**scope, "q": q, "text_limit": LEXICAL_CANDIDATES, "vec": vec, "k": k, "limit": limit}
    (first,) = await read(SEARCH, params)  # both indexes in one statement
    hits = {h.iri: h for h in _lexical(first["texts"], text or "")}
    nearest = await _nearest(read, scope, vec, limit, first["hits"], first["total"] >= k) if vec else []
    for h in nearest:
        hits.setdefault(h.iri, h)
    return rank_entity_hits(list(hits.values()), limit)


async def _nearest(
    read: Runner, scope: dict[str, str], vec: CypherVector, limit: int, found: list[dict[str, Any]], more: bool
) -> list[EntityHit]:
    """The tenant's `limit` nearest entities by cosine from the first ANN read's hits (`more`:
    the index may hold further nodes): a wider read when they are too few, then an exact scan."""
    for factor in ANN_OVERFETCH[1:]:
        if len(found) >= limit or not more:
            break
        k = _ann_k(limit, factor)
        ann = (await read(ANN, {**scope, "k": k, "vec": vec, "limit": limit}))[0]
        found, more = ann["hits"], ann["total"] >= k
    if len(found) < limit and more:
        found = rows_of(await read(EXACT, {**scope, "vec": vec, "limit": limit}))
    best = sorted(found, key=lambda r: -r["sim"])[:limit]
    return [EntityHit(r["iri"], r["label"], float(r["sim"])) for r in best]


async def labels_read(read: Runner, tenant: Tenant, iris: Sequence[str]) -> dict[str, str]:
    """Labels of many IRIs in one UNWIND query."""
    keys = [entity_key(tenant, i) for i in dict.fromkeys(iris)]
    if not keys:
        return {}
    rows = rows_of(await read(LABELS, {"keys": keys, "user": tenant.user, "collection": tenant.collection}))
    return {r["iri"]: r["label"] for r in rows}


async def load_state_read(read: Runner, tenant: Tenant) -> LoadState | None:
    """The collection's load state (None: no load recorded)."""
    rows = await read(GET_LOAD, {"key": collection_key(tenant)})
    if not rows:
        return None
    state = rows[0]["state"]
    return LoadState(**{f.name: state[f.name] for f in fields(LoadState) if f.name in state})


async def concept_keys_read(read: Runner, tenant: Tenant, keys: Sequence[str]) -> dict[str, list[str]]:
    """Key -> the concepts it is a key or an alias of."""
    if not keys:
        return {}
    names = [name_key(tenant, k) for k in dict.fromkeys(keys)]
    rows = await read(CONCEPT_NAMES, {**tenant_params(tenant), "names": names})
    return {r["name"]: r["iris"] for r in rows}


class TxEntityReads:
    """chunk_reads.EntityReads over the statements of one read transaction (`run`)."""

    def __init__(self, run: Runner) -> None:
        self.run = run

    async def entity_search(
        self, tenant: Tenant, vector: Sequence[float] | None, text: str | None, limit: int
    ) -> list[EntityHit]:
        """See EntityIndex.search."""
        return await entity_search(self.run, tenant, vector, text, limit)

    async def concept_keys(self, tenant: Tenant, keys: Sequence[str]) -> dict[str, list[str]]:
        """See DocumentStore.concept_keys."""
        return await concept_keys_read(self.run, tenant, keys)

    async def labels(self, tenant: Tenant, iris: Sequence[str]) -> dict[str, str]:
        """See TripleStore.labels."""
        return await labels_read(self.run, tenant, iris)

    async def load_state(self, tenant: Tenant) -> LoadState | None:
        """See TripleStore.load_state."""
        return await load_state_read(self.run, tenant)


def _lexical(rows: Sequence[dict[str, Any]], text: str) -> list[EntityHit]:
    """Of the full-text candidates, the entities whose whole label the text contains."""
    hits: dict[str, EntityHit] = {}
    for r in rows:
        score = label_match_score(r["label"] or "", text)
        if score >= 1.0 and r["iri"] not in hits:
            hits[r["iri"]] = EntityHit(r["iri"], r["label"], score, lexical=True)
    return list(hits.values())


def _ann_k(limit: int, factor: int) -> int:
    """The nodes an ANN read over-fetches for `limit` of a tenant's."""
    return min(max(limit * factor, ANN_MIN_K), ANN_MAX_K)
