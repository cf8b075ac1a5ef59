"""Graph-embeddings processor: nearest entities, exact label matches and nearest predicates in one round trip."""

from __future__ import annotations

import asyncio
from typing import Any

from processors.base.bus import Bus
from processors.base.processor import FlowContext, FlowProcessor, ServiceSpec
from processors.stores.protocol import EntityHit, EntityIndex
from schemas.graph_embeddings import EntityMatch, GraphEmbeddingsRequest, GraphEmbeddingsResponse
from schemas.terms import Term


class GraphEmbeddingsProcessor(FlowProcessor):
    """Serves `graph-embeddings` from an entity index."""

    name = "graph-embeddings"

    def __init__(self, bus: Bus, entities: EntityIndex, **kw: Any) -> None:
        super().__init__(bus, **kw)
        self.entities = entities

    def services(self) -> list[ServiceSpec]:
        return [ServiceSpec("graph-embeddings", GraphEmbeddingsRequest, GraphEmbeddingsResponse, self.search)]

    async def search(self, req: GraphEmbeddingsRequest, flow: FlowContext) -> GraphEmbeddingsResponse:
        """Search the request's scope."""
        searches = [self.entities.search(req.user, req.collection, req.vector, req.text, req.limit)]
        if req.predicate_limit:
            searches.append(self.entities.nearest_predicates(req.user, req.collection, req.vector, req.predicate_limit))
        hits, *preds = await asyncio.gather(*searches)
        return GraphEmbeddingsResponse(entities=_matches(hits), predicates=_matches(preds[0] if preds else []))


def _matches(hits: list[EntityHit]) -> list[EntityMatch]:
    return [EntityMatch(entity=Term.iri(h.iri), score=h.score, label=h.label, lexical=h.lexical) for h in hits]
