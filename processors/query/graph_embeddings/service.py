"""Graph-embeddings processor: nearest entities, exact label matches and nearest predicates in one
round trip, plus what a client should know about the collection (unknown, or left incomplete by a
load that did not finish). How the seeds are found: seeds.py."""

from __future__ import annotations

import asyncio

from processors.base.processor import FlowContext, ServiceSpec
from processors.query.graph_embeddings.seeds import collection_notices, scoped, unscoped
from processors.services.store_processor import StoreProcessor
from processors.stores.protocol import EntityHit
from schemas.graph_embeddings import EntityMatch, GraphEmbeddingsRequest, GraphEmbeddingsResponse
from schemas.services import GRAPH_EMBEDDINGS
from schemas.terms import Term

__all__ = ["GraphEmbeddingsProcessor", "collection_notices", "matches"]


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
            first = scoped(self.stores, req.tenant, req.vector, req.text, req.limit)
        else:
            first = unscoped(self.stores, req.tenant, req.vector, req.text, req.limit)
        searches = [first, collection_notices(self.stores.triples, req.tenant)]
        if req.predicate_limit:
            searches.append(self.stores.entities.nearest_predicates(req.tenant, req.vector, req.predicate_limit))
        hits, notices, *preds = await asyncio.gather(*searches)
        return GraphEmbeddingsResponse(
            entities=matches(hits), predicates=matches(preds[0] if preds else []), warnings=notices
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


def matches(hits: list[EntityHit]) -> list[EntityMatch]:
    """Entity hits as they go on the wire."""
    return [EntityMatch(entity=Term.iri(h.iri), score=h.score, label=h.label, lexical=h.lexical) for h in hits]
