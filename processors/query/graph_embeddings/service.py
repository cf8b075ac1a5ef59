"""Graph-embeddings processor: nearest entities, exact label matches and nearest predicates in one
round trip, plus what a client should know about the collection (unknown, or left incomplete by a
load that did not finish)."""

from __future__ import annotations

import asyncio

from processors.base.bus import Bus
from processors.base.processor import FlowContext, FlowProcessor, Host, ServiceSpec
from processors.base.settings import RuntimeSettings
from processors.stores.protocol import EntityHit, EntityIndex, TripleStore
from schemas.base import Notice
from schemas.graph_embeddings import EntityMatch, GraphEmbeddingsRequest, GraphEmbeddingsResponse
from schemas.services import GRAPH_EMBEDDINGS
from schemas.terms import Term


class GraphEmbeddingsProcessor(FlowProcessor):
    """Serves `graph-embeddings` from an entity index (and the triple store's load states)."""

    name = GRAPH_EMBEDDINGS.name

    def __init__(self, bus: Bus, runtime: RuntimeSettings, entities: EntityIndex, triples: TripleStore) -> None:
        super().__init__(bus, runtime)
        self.entities = entities
        self.triples = triples

    @classmethod
    def create(cls, host: Host) -> GraphEmbeddingsProcessor:
        """Served from the process's stores."""
        return cls(host.bus, host.runtime, host.stores.entities, host.stores.triples)

    def services(self) -> list[ServiceSpec]:
        return [ServiceSpec(GRAPH_EMBEDDINGS, self.search)]

    async def search(self, req: GraphEmbeddingsRequest, flow: FlowContext) -> GraphEmbeddingsResponse:
        """Search the request's scope (the collection's state is read alongside)."""
        searches = [
            self.entities.search(req.user, req.collection, req.vector, req.text, req.limit),
            collection_notices(self.triples, req.user, req.collection),
        ]
        if req.predicate_limit:
            searches.append(self.entities.nearest_predicates(req.user, req.collection, req.vector, req.predicate_limit))
        hits, notices, *preds = await asyncio.gather(*searches)
        return GraphEmbeddingsResponse(
            entities=_matches(hits), predicates=_matches(preds[0] if preds else []), warnings=notices
        )


async def collection_notices(triples: TripleStore, user: str, collection: str) -> list[Notice]:
    """What a query over `user`/`collection` should say: nothing for a complete collection; that
    it is incomplete (and why) after a load that did not finish; that it is unknown, naming the
    user's collections."""
    state = await triples.load_state(user, collection)
    if state is not None:
        return [] if state.complete else [Notice(type="incomplete-collection", message=state.describe(collection))]
    if await triples.pattern(user, collection, None, None, None, 1):  # written without a recorded load
        return []
    known = await triples.collections(user)
    where = f"known collections of user {user!r}: {', '.join(known)}" if known else f"user {user!r} has none"
    message = f"collection {collection!r} is empty or unknown ({where})"
    return [Notice(type="unknown-collection", message=message)]


def _matches(hits: list[EntityHit]) -> list[EntityMatch]:
    return [EntityMatch(entity=Term.iri(h.iri), score=h.score, label=h.label, lexical=h.lexical) for h in hits]
