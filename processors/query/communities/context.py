"""A neighbourhood's context (bus-free): the communities its entities belong to, with their top
entities' labels, and the relations among the entities. Read from each store on its own
(`StoresContextReads`), or on a store that holds them all inside one read transaction
(chunk_reads.ContextReads: issue 38, a lazy-rag question's context in one round trip)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from processors.stores.chunk_reads import ContextReads, RelationHit
from processors.stores.factory import Stores
from schemas.communities import CommunityInfo
from schemas.tenant import Tenant


class StoresContextReads:
    """chunk_reads.ContextReads over the process's stores, one call each."""

    def __init__(self, stores: Stores) -> None:
        self.stores = stores

    async def relations(self, tenant: Tenant, entities: Sequence[str], limit: int) -> list[RelationHit]:
        return await self.stores.documents.relations(tenant, entities, limit)

    async def of_entities(self, tenant: Tenant, entities: Sequence[str], level: int) -> dict[str, str]:
        return await self.stores.communities.of_entities(tenant, entities, level)

    async def communities(self, tenant: Tenant, ids: Sequence[str]) -> list[CommunityInfo]:
        return await self.stores.communities.list(tenant, None, ids, len(ids))

    async def labels(self, tenant: Tenant, iris: Sequence[str]) -> dict[str, str]:
        return await self.stores.triples.labels(tenant, iris)


async def communities_of(
    reads: ContextReads, tenant: Tenant, entities: Sequence[str], level: int, limit: int
) -> tuple[dict[str, str], list[CommunityInfo]]:
    """Each entity's community at `level`, and the first `limit` of them in the entities' order,
    labelled (one read after another: they may share a transaction)."""
    of = await reads.of_entities(tenant, entities, level)
    ids = list(dict.fromkeys(of[e] for e in entities if e in of))[:limit]
    if not ids:
        return of, []
    found = await labelled(reads, tenant, await reads.communities(tenant, ids))
    order = {cid: i for i, cid in enumerate(ids)}
    return of, sorted(found, key=lambda c: order.get(c.id, len(order)))


@dataclass
class Context:
    """A neighbourhood's context: relations among its entities, their communities, their labels."""

    relations: list[RelationHit]
    membership: dict[str, str]
    communities: list[CommunityInfo]
    labels: dict[str, str]


async def context_of(
    reads: ContextReads, tenant: Tenant, entities: Sequence[str], level: int, limit: int, relations: int, labels: bool
) -> Context:
    """The `relations` strongest relations among the entities, `communities_of` them and (with
    `labels`) their labels, one read after another (they may share a transaction)."""
    rels = await reads.relations(tenant, entities, relations) if relations else []
    of, found = await communities_of(reads, tenant, entities, level, limit)
    return Context(rels, of, found, await reads.labels(tenant, entities) if labels else {})


async def context_alongside(
    stores: Stores, tenant: Tenant, entities: Sequence[str], level: int, limit: int, relations: int, labels: bool
) -> Context:
    """`context_of` over the process's stores, each read alongside the others."""
    reads = StoresContextReads(stores)
    rels, (of, found), named = await asyncio.gather(
        reads.relations(tenant, entities, relations) if relations else _nothing(),
        communities_of(reads, tenant, entities, level, limit),
        reads.labels(tenant, entities) if labels else _no_labels(),
    )
    return Context(rels, of, found, named)


async def labelled(reads: ContextReads, tenant: Tenant, found: list[CommunityInfo]) -> list[CommunityInfo]:
    """Communities with their top entities' labels (one batched label lookup)."""
    iris = sorted({e for c in found for e in c.top_entities})
    labels = await reads.labels(tenant, iris) if iris else {}
    return [c.model_copy(update={"top_entity_labels": [labels.get(e, e) for e in c.top_entities]}) for c in found]


async def _nothing() -> list[RelationHit]:
    return []


async def _no_labels() -> dict[str, str]:
    return {}
