"""A question's seed entities (bus-free): the entities its text names, by a label or by another of
their names (an alias documents gave them: "Marie Skłodowska-Curie", "Neil Peart"), then the
nearest by vector; with a scope, only entities a chunk in it mentions. Also what a client should
know about the collection (unknown, or left incomplete by a load that did not finish).

Served by graph-embeddings; the documents service finds them beside a chunk search, on a store
that holds the entities too inside the search's own read transaction (`seeds_in`: issue 38)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from processors.algorithms.entities import rank_entity_hits
from processors.algorithms.text_match import label_phrases
from processors.stores.chunk_reads import EntityReads
from processors.stores.factory import Stores
from processors.stores.protocol import EntityHit, LoadState, TripleStore
from schemas.base import Notice
from schemas.tenant import Tenant


async def seed_search(
    stores: Stores, tenant: Tenant, vector: Sequence[float], text: str | None, limit: int
) -> tuple[list[EntityHit], list[Notice]]:
    """The seeds of (vector, text) in the tenant's scope, and the collection's notices, each read
    from its own store (concurrently)."""
    if tenant.scope is not None and not tenant.scope.is_empty:
        found = scoped(stores, tenant, vector, text, limit)
    else:
        found = unscoped(stores, tenant, vector, text, limit)
    hits, notices = await asyncio.gather(found, collection_notices(stores.triples, tenant))
    return hits, notices


async def seeds_in(
    reads: EntityReads, triples: TripleStore, tenant: Tenant, vector: Sequence[float], text: str | None, limit: int
) -> tuple[list[EntityHit], list[Notice]]:
    """`seed_search` over the whole collection with `reads` (one read transaction's: one statement
    after another), the same hits; only an unknown collection's notice reads `triples` after it."""
    state = await reads.load_state(tenant)
    hits = await reads.entity_search(tenant, vector, text, limit)
    aliases = await reads.concept_keys(tenant, label_phrases(text)) if text else {}
    extra = _alias_extras(hits, aliases)
    if extra:
        hits = _with_aliases(hits, extra, await reads.labels(tenant, extra), limit)
    return hits, await state_notices(state, triples, tenant)


async def unscoped(
    stores: Stores, tenant: Tenant, vector: Sequence[float], text: str | None, limit: int
) -> list[EntityHit]:
    """The entity index's hits, and the entities the question names by an alias, as named ones."""
    hits, aliases = await asyncio.gather(
        stores.entities.search(tenant, vector, text, limit),
        stores.documents.concept_keys(tenant, label_phrases(text)) if text else _none(),
    )
    extra = _alias_extras(hits, aliases)
    if not extra:
        return hits
    return _with_aliases(hits, extra, await stores.triples.labels(tenant, extra), limit)


async def scoped(
    stores: Stores, tenant: Tenant, vector: Sequence[float], text: str | None, limit: int
) -> list[EntityHit]:
    """Exact search over the entities a chunk in the scope mentions (the index cannot filter)."""
    allowed = await stores.documents.scoped_entities(tenant)
    if not allowed:
        return []
    sims = await stores.entities.similarities(tenant, vector, sorted(allowed))
    nearest = sorted(sims.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    named = await stores.entities.named(tenant, label_phrases(text)) if text else {}
    lexical = sorted({iri for iri in named.values() if iri in allowed})
    labels = await stores.triples.labels(tenant, sorted({i for i, _ in nearest} | set(lexical)))
    hits = [EntityHit(i, labels.get(i, i), 1.0, lexical=True) for i in lexical]
    hits += [EntityHit(i, labels.get(i, i), s) for i, s in nearest if i not in set(lexical)]
    return rank_entity_hits(hits, limit)


async def collection_notices(triples: TripleStore, tenant: Tenant) -> list[Notice]:
    """What a query over `tenant` should say (see `state_notices`)."""
    return await state_notices(await triples.load_state(tenant), triples, tenant)


async def state_notices(state: LoadState | None, triples: TripleStore, tenant: Tenant) -> list[Notice]:
    """Nothing for a complete collection; that it is incomplete (and why) after a load that did
    not finish; that it is unknown, naming the user's collections (`state` None: no load recorded)."""
    if state is not None:
        return (
            [] if state.complete else [Notice(type="incomplete-collection", message=state.describe(tenant.collection))]
        )
    if await triples.pattern(tenant, None, None, None, 1):  # written without a recorded load
        return []
    known = sorted(await triples.collections(tenant.user))
    where = (
        f"known collections of user {tenant.user!r}: {', '.join(known)}" if known else f"user {tenant.user!r} has none"
    )
    message = f"collection {tenant.collection!r} is empty or unknown ({where})"
    return [Notice(type="unknown-collection", message=message)]


def _alias_extras(hits: Sequence[EntityHit], aliases: dict[str, list[str]]) -> list[str]:
    """The concepts an alias in the text names alone that the hits do not have as named ones."""
    named = {h.iri for h in hits if h.lexical}
    return sorted({iris[0] for iris in aliases.values() if len(iris) == 1} - named)


def _with_aliases(
    hits: Sequence[EntityHit], extra: Sequence[str], labels: dict[str, str], limit: int
) -> list[EntityHit]:
    """`hits` with the `extra` concepts as named ones (ranked as rank_entity_hits does)."""
    more = [EntityHit(i, labels.get(i, i), 1.0, lexical=True) for i in extra]
    return rank_entity_hits([*more, *(h for h in hits if h.iri not in set(extra))], limit)


async def _none() -> dict[str, list[str]]:
    return {}
