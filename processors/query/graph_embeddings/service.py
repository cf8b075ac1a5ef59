"""Graph-embeddings processor: nearest entities, exact label matches and nearest predicates in one
round trip, plus what a client should know about the collection (unknown, or left incomplete by a
load that did not finish)."""

from __future__ import annotations

import asyncio

from processors.algorithms.entities import rank_entity_hits
from processors.algorithms.text_match import label_phrases
from processors.base.processor import FlowContext, ServiceSpec
from processors.services.store_processor import StoreProcessor
from processors.stores.protocol import EntityHit, TripleStore
from schemas.base import Notice
from schemas.graph_embeddings import EntityMatch, GraphEmbeddingsRequest, GraphEmbeddingsResponse
from schemas.services import GRAPH_EMBEDDINGS
from schemas.tenant import Tenant
from schemas.terms import Term


class GraphEmbeddingsProcessor(StoreProcessor):
    """Serves `graph-embeddings`: nearest entities (and predicates) of a vector, per collection."""

    name = GRAPH_EMBEDDINGS.name

    def services(self) -> list[ServiceSpec]:
        return [ServiceSpec(GRAPH_EMBEDDINGS, self.search)]

    async def search(self, req: GraphEmbeddingsRequest, flow: FlowContext) -> GraphEmbeddingsResponse:
        """Search the request's user + collection, and scope if it has one (the collection's state
        is read alongside)."""
        if req.iris is not None:
            return GraphEmbeddingsResponse(similarities=await self._similarities(req))
        if req.scope is not None and not req.scope.is_empty:
            first = self._scoped(req)
        else:
            first = self._unscoped(req)
        searches = [first, collection_notices(self.stores.triples, req.tenant)]
        if req.predicate_limit:
            searches.append(self.stores.entities.nearest_predicates(req.tenant, req.vector, req.predicate_limit))
        hits, notices, *preds = await asyncio.gather(*searches)
        return GraphEmbeddingsResponse(
            entities=_matches(hits), predicates=_matches(preds[0] if preds else []), warnings=notices
        )

    async def _similarities(self, req: GraphEmbeddingsRequest) -> dict[str, float]:
        """Cosine of the vector to each of `req.iris` (in scope: those a chunk in it mentions)."""
        assert req.iris is not None
        iris = req.iris
        if req.scope is not None and not req.scope.is_empty:
            allowed = await self.stores.documents.scoped_entities(req.tenant)
            iris = [i for i in iris if i in allowed]
        if not iris:
            return {}
        return await self.stores.entities.similarities(req.tenant, req.vector, iris)

    async def _unscoped(self, req: GraphEmbeddingsRequest) -> list[EntityHit]:
        """The entity index's hits, and the entities the question names by another of their names
        (an alias documents gave them: "Marie Skłodowska-Curie", "Neil Peart"), as named ones."""
        tenant = req.tenant
        hits, aliases = await asyncio.gather(
            self.stores.entities.search(tenant, req.vector, req.text, req.limit),
            self.stores.documents.concept_keys(tenant, label_phrases(req.text)) if req.text else _none(),
        )
        named = {h.iri for h in hits if h.lexical}
        extra = sorted({iris[0] for iris in aliases.values() if len(iris) == 1} - named)
        if not extra:
            return hits
        labels = await self.stores.triples.labels(tenant, extra)
        more = [EntityHit(i, labels.get(i, i), 1.0, lexical=True) for i in extra]
        return rank_entity_hits([*more, *(h for h in hits if h.iri not in set(extra))], req.limit)

    async def _scoped(self, req: GraphEmbeddingsRequest) -> list[EntityHit]:
        """Exact search over the entities a chunk in the scope mentions (the index cannot filter)."""
        assert req.scope is not None
        tenant = req.tenant
        allowed = await self.stores.documents.scoped_entities(tenant)
        if not allowed:
            return []
        sims = await self.stores.entities.similarities(tenant, req.vector, sorted(allowed))
        nearest = sorted(sims.items(), key=lambda kv: (-kv[1], kv[0]))[: req.limit]
        named = await self.stores.entities.named(tenant, label_phrases(req.text)) if req.text else {}
        lexical = sorted({iri for iri in named.values() if iri in allowed})
        labels = await self.stores.triples.labels(tenant, sorted({i for i, _ in nearest} | set(lexical)))
        hits = [EntityHit(i, labels.get(i, i), 1.0, lexical=True) for i in lexical]
        hits += [EntityHit(i, labels.get(i, i), s) for i, s in nearest if i not in set(lexical)]
        return rank_entity_hits(hits, req.limit)


async def collection_notices(triples: TripleStore, tenant: Tenant) -> list[Notice]:
    """What a query over `tenant` should say: nothing for a complete collection; that
    it is incomplete (and why) after a load that did not finish; that it is unknown, naming the
    user's collections."""
    state = await triples.load_state(tenant)
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


async def _none() -> dict[str, list[str]]:
    return {}


def _matches(hits: list[EntityHit]) -> list[EntityMatch]:
    return [EntityMatch(entity=Term.iri(h.iri), score=h.score, label=h.label, lexical=h.lexical) for h in hits]
