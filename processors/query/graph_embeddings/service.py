"""Graph-embeddings processor: nearest entities, exact label matches and nearest predicates in one round trip."""

from __future__ import annotations

import asyncio

from processors.base.bus import Bus
from processors.base.processor import FlowContext, FlowProcessor, Host, ServiceSpec
from processors.base.settings import RuntimeSettings
from processors.stores.protocol import EntityHit, EntityIndex
from schemas.graph_embeddings import EntityMatch, GraphEmbeddingsRequest, GraphEmbeddingsResponse
from schemas.services import GRAPH_EMBEDDINGS
from schemas.terms import Term


class GraphEmbeddingsProcessor(FlowProcessor):
    """Serves `graph-embeddings` from an entity index."""

    name = GRAPH_EMBEDDINGS.name

    def __init__(self, bus: Bus, runtime: RuntimeSettings, entities: EntityIndex) -> None:
        super().__init__(bus, runtime)
        self.entities = entities

    @classmethod
    def create(cls, host: Host) -> GraphEmbeddingsProcessor:
        """Served from the process's entity index."""
        return cls(host.bus, host.runtime, host.stores.entities)

    def services(self) -> list[ServiceSpec]:
        return [ServiceSpec(GRAPH_EMBEDDINGS, self.search)]

    async def search(self, req: GraphEmbeddingsRequest, flow: FlowContext) -> GraphEmbeddingsResponse:
        """Search the request's scope."""
        searches = [self.entities.search(req.user, req.collection, req.vector, req.text, req.limit)]
        if req.predicate_limit:
            searches.append(self.entities.nearest_predicates(req.user, req.collection, req.vector, req.predicate_limit))
        hits, *preds = await asyncio.gather(*searches)
        return GraphEmbeddingsResponse(entities=_matches(hits), predicates=_matches(preds[0] if preds else []))


def _matches(hits: list[EntityHit]) -> list[EntityMatch]:
    return [EntityMatch(entity=Term.iri(h.iri), score=h.score, label=h.label, lexical=h.lexical) for h in hits]
