"""Graph-embeddings processor: nearest entities (and exact label matches) in one round trip."""

from __future__ import annotations

from typing import Any

from processors.base.bus import Bus
from processors.base.processor import FlowContext, FlowProcessor, ServiceSpec
from processors.stores.protocol import EntityIndex
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
        hits = await self.entities.search(req.user, req.collection, req.vector, req.text, req.limit)
        return GraphEmbeddingsResponse(
            entities=[
                EntityMatch(entity=Term.iri(h.iri), score=h.score, label=h.label, lexical=h.lexical) for h in hits
            ]
        )
