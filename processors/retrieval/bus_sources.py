"""The retrieval services' view of the rest of the system over the bus: one method per call,
shared by lazy-rag, kg-query, drift, the reranker and (for the reranker call) graph-rag; each
declares, as a protocol, the methods it uses. Each method is marked with the services it calls,
from which a processor derives `calls()` (`calls_of`), so its declared calls fit its protocol."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from datetime import datetime
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from processors.algorithms.bfs import Distances, DistanceSearch
from processors.base.client import RemoteError, RequestTimeout
from processors.base.errors import QueryTimeout, ServiceError
from processors.base.processor import FlowContext
from processors.models.embeddings.client import request_parts
from processors.models.text_completion.prompting import ModelAnswer
from processors.retrieval.common import Usage
from schemas.base import MAX_QUERY_CHARS, Notice, Response
from schemas.communities import CommunitiesOf, CommunityInfo, SearchCommunities, SummarizeCommunities
from schemas.documents import (
    MAX_EXPANDED,
    Chunk,
    ChunkSearch,
    ChunkSimilarities,
    EntityChunks,
    EntityRelations,
    EpisodeMentions,
    GetChunks,
    Mention,
    RelationChunks,
    SearchMode,
    SearchRelations,
)
from schemas.embeddings import EmbeddingsRequest
from schemas.extraction import ConceptMention, ExtractRequest
from schemas.graph_embeddings import EntityMatch, GraphEmbeddingsRequest
from schemas.graph_rag import SeedEntity
from schemas.labels import LabelRequest
from schemas.reranker import RerankRequest, RerankResponse
from schemas.retrieval import RelationshipRef, SearchText
from schemas.services import (
    COMMUNITIES,
    DOCUMENTS,
    EMBEDDINGS,
    EXTRACTOR,
    GRAPH_EMBEDDINGS,
    LABEL_RESOLVER,
    RERANKER,
    TEXT_COMPLETION,
    TRIPLES,
    AnyService,
    Service,
)
from schemas.tenant import Tenant
from schemas.text_completion import TextCompletionRequest
from schemas.triples import DistancesQuery, NeighboursQuery

R = TypeVar("R", bound=Response)
CANDIDATES_PER_ENTITY = 32  # edges read per entity before the best are kept
# The collection notices (unknown, incomplete) a request's entity searches met, for the service to
# put in its answer as graph-rag does (see `collecting_notices`); None outside a collecting request.
_NOTICES: ContextVar[list[Notice] | None] = ContextVar("collection_notices", default=None)


F = TypeVar("F", bound=Callable[..., Any])
_CALLS = "_service_calls"


async def call_service(flow: FlowContext[Any], service: Service[BaseModel, R], req: BaseModel, timeout_s: float) -> R:
    """`req`'s response from `service` in `flow`, typed by the service. A timeout or an error answer
    ends the request with a typed error (not a redelivery: asking again would fail the same way)."""
    try:
        return await flow.client(service).request(req, timeout_s=timeout_s)
    except RequestTimeout:
        raise QueryTimeout(f"{service.name} did not answer within {timeout_s}s; query abandoned") from None
    except RemoteError as e:
        raise ServiceError(e.type, f"{service.name}: {e.message}") from None


def uses(*services: AnyService) -> Callable[[F], F]:
    """Mark a source method with the services it calls (read by `calls_of`)."""

    def mark(method: F) -> F:
        setattr(method, _CALLS, services)
        return method

    return mark


def _methods(protocol: type) -> list[str]:
    """The public methods a protocol (and the protocols it extends) declares."""
    names: dict[str, None] = {}
    for cls in reversed(protocol.__mro__):
        if cls in (object, Protocol) or not getattr(cls, "_is_protocol", False):
            continue
        names.update((n, None) for n, v in vars(cls).items() if not n.startswith("_") and callable(v))
    return list(names)


def calls_of(impl: type, *protocols: type) -> list[AnyService]:
    """The services `impl` calls to serve the methods of `protocols`, each once, in first-use order.
    A protocol method `impl` does not mark (or lacks) is a TypeError: the sources do not fit."""
    found: dict[str, AnyService] = {}
    for protocol in protocols:
        for name in _methods(protocol):
            services = getattr(getattr(impl, name, None), _CALLS, None)
            if services is None:
                raise TypeError(f"{impl.__name__}.{name} (of {protocol.__name__}) names no service it calls")
            found.update((s.name, s) for s in services if s.name not in found)
    return list(found.values())


@contextlib.contextmanager
def collecting_notices() -> Iterator[list[Notice]]:
    """The collection notices the entity searches made inside the block meet (each once)."""
    found: list[Notice] = []
    token = _NOTICES.set(found)
    try:
        yield found
    finally:
        _NOTICES.reset(token)


class BusSources:
    """The retrieval services' sources (lazy-rag, kg-query, drift) over the flow's clients; a call
    that fails or times out ends the request with a typed error (not a redelivery)."""

    def __init__(self, flow: FlowContext, stage_timeout_s: float, model_timeout_s: float | None = None) -> None:
        self.flow = flow
        self.timeout = stage_timeout_s
        self.model_timeout = model_timeout_s or stage_timeout_s  # a model call (summaries too) may take longer

    async def _call(self, service: Service[BaseModel, R], req: BaseModel, timeout_s: float | None = None) -> R:
        return await call_service(self.flow, service, req, timeout_s or self.timeout)

    @uses(EMBEDDINGS)
    async def embed(self, text: str) -> list[float]:
        return (await self.embed_texts([text], query=True))[0]

    @uses(EMBEDDINGS)
    async def embed_texts(self, texts: Sequence[str], query: bool = False) -> list[list[float]]:
        out: list[list[float]] = []
        for part in request_parts(texts):  # any number of texts, in requests the service takes
            out += (await self._call(EMBEDDINGS, EmbeddingsRequest(texts=part, query=query))).vectors
        return out

    @uses(DOCUMENTS)
    async def search_chunks(
        self,
        t: Tenant,
        vector: list[float],
        text: str | None,
        limit: int,
        mode: SearchMode = "fused",
        communities: Sequence[str] | None = None,
    ) -> list[Chunk]:
        text = None if text is None else text[:MAX_QUERY_CHARS]  # a follow-up adds names to the question
        req = ChunkSearch(user=t.user, collection=t.collection, scope=t.scope, vector=vector, text=text, limit=limit,
                          mode=mode, communities=None if communities is None else list(communities))  # fmt: skip
        return (await self._call(DOCUMENTS, req)).chunks

    @uses(DOCUMENTS)
    async def search_many(
        self, t: Tenant, searches: Sequence[tuple[list[float], str]], limit: int, mode: SearchMode = "fused"
    ) -> list[list[Chunk]]:
        if not searches:
            return []
        asked = [SearchText(vector=v, text=text[:MAX_QUERY_CHARS]) for v, text in searches]
        req = ChunkSearch(user=t.user, collection=t.collection, scope=t.scope, limit=limit, mode=mode, searches=asked)
        res = await self._call(DOCUMENTS, req)
        by_id = {c.id: c for c in res.chunks}
        return [[by_id[i].model_copy(update={"score": s}) for i, s in found if i in by_id] for found in res.by_search]

    @uses(DOCUMENTS)
    async def community_chunks(
        self, t: Tenant, communities: Sequence[str], vector: list[float], text: str, per_community: int
    ) -> dict[str, list[Chunk]]:
        text = text[:MAX_QUERY_CHARS]
        req = ChunkSearch(user=t.user, collection=t.collection, scope=t.scope, vector=vector, text=text,
                          communities=list(communities), per_community=per_community)  # fmt: skip
        res = await self._call(DOCUMENTS, req)
        by_id = {c.id: c for c in res.chunks}
        return {k: [by_id[i] for i in ids if i in by_id] for k, ids in res.by_community.items()}

    @uses(COMMUNITIES)
    async def search_communities(self, t: Tenant, vector: list[float], limit: int) -> list[CommunityInfo]:
        req = SearchCommunities(user=t.user, collection=t.collection, scope=t.scope, vector=vector, limit=limit)
        return (await self._call(COMMUNITIES, req)).communities

    @uses(COMMUNITIES)
    async def summarize_communities(self, t: Tenant, ids: Sequence[str]) -> tuple[list[CommunityInfo], Usage]:
        req = SummarizeCommunities(user=t.user, collection=t.collection, ids=list(ids))
        res = await self._call(COMMUNITIES, req, self.model_timeout)
        return res.communities, Usage(res.llm_calls, res.in_token, res.out_token)

    @uses(GRAPH_EMBEDDINGS)
    async def seeds(self, t: Tenant, vector: list[float], text: str, limit: int) -> list[SeedEntity]:
        req = GraphEmbeddingsRequest(
            user=t.user, collection=t.collection, vector=vector, text=text, limit=limit, scope=t.scope
        )
        res = await self._call(GRAPH_EMBEDDINGS, req)
        return _seeds(res.entities, res.warnings)

    @uses(DOCUMENTS)
    async def links(
        self, t: Tenant, entities: Sequence[str], chunk_ids: Sequence[str], per_entity: int
    ) -> list[Mention]:
        req = EntityChunks(user=t.user, collection=t.collection, scope=t.scope, entities=list(entities),
                           chunk_ids=list(chunk_ids), per_entity=per_entity)  # fmt: skip
        links = (await self._call(DOCUMENTS, req)).links
        return links.mentions if links else []

    @uses(DOCUMENTS)
    async def search_and_seed(
        self, t: Tenant, vector: list[float], text: str, limit: int, seeds: int
    ) -> tuple[list[Chunk], list[SeedEntity]]:
        req = ChunkSearch(user=t.user, collection=t.collection, scope=t.scope, vector=vector,
                          text=text[:MAX_QUERY_CHARS], limit=limit, mode="graph", seed_entities=seeds)  # fmt: skip
        res = await self._call(DOCUMENTS, req)
        return res.chunks, _seeds(res.seeds, res.warnings)

    @uses(DOCUMENTS)
    async def expand(
        self, t: Tenant, entities: Sequence[str], chunk_ids: Sequence[str], per_entity: int, hops: int,
        max_entities: int,
    ) -> list[Mention]:  # fmt: skip
        if hops < 1 or not (entities or chunk_ids):
            return []
        req = EntityChunks(user=t.user, collection=t.collection, scope=t.scope, entities=list(entities),
                           chunk_ids=list(chunk_ids), per_entity=per_entity, hops=hops,
                           max_entities=min(max_entities, MAX_EXPANDED))  # fmt: skip
        links = (await self._call(DOCUMENTS, req)).links
        return links.mentions if links else []

    @uses(DOCUMENTS)
    async def chunks(self, t: Tenant, ids: Sequence[str]) -> list[Chunk]:
        req = GetChunks(user=t.user, collection=t.collection, scope=t.scope, chunk_ids=list(ids))
        return (await self._call(DOCUMENTS, req)).chunks

    @uses(LABEL_RESOLVER)
    async def labels(self, t: Tenant, iris: Sequence[str]) -> dict[str, str]:
        if not iris:
            return {}
        return (
            await self._call(LABEL_RESOLVER, LabelRequest(user=t.user, collection=t.collection, iris=list(iris)))
        ).labels

    @uses(DOCUMENTS)
    async def relations(self, t: Tenant, entities: Sequence[str]) -> list[RelationshipRef]:
        if not entities:
            return []
        req = EntityRelations(user=t.user, collection=t.collection, scope=t.scope, entities=list(entities))
        return (await self._call(DOCUMENTS, req)).relations

    @uses(COMMUNITIES)
    async def communities(
        self, t: Tenant, entities: Sequence[str], summarize: bool, limit: int
    ) -> tuple[list[CommunityInfo], int]:
        if not entities:
            return [], 0
        req = CommunitiesOf(user=t.user, collection=t.collection, entities=list(entities), summarize=summarize,
                            limit=limit)  # fmt: skip
        res = await self._call(COMMUNITIES, req, self.model_timeout if summarize else None)  # summaries: model calls
        return res.communities, res.llm_calls

    @uses(COMMUNITIES)
    async def context(
        self, t: Tenant, entities: Sequence[str], limit: int
    ) -> tuple[list[RelationshipRef], list[CommunityInfo], dict[str, str]]:
        if not entities:
            return [], [], {}
        n = EntityRelations.model_fields["limit"].default  # as many relations as `relations` reads
        req = CommunitiesOf(user=t.user, collection=t.collection, scope=t.scope, entities=list(entities), limit=limit,
                            relations=n, labels=True)  # fmt: skip
        res = await self._call(COMMUNITIES, req)
        return res.relations, res.communities, res.labels

    @uses(EXTRACTOR)
    async def concepts(self, text: str) -> list[ConceptMention]:
        return (await self._call(EXTRACTOR, ExtractRequest(texts=[text]))).mentions[0]

    @uses(TEXT_COMPLETION)
    async def complete(
        self, system: str, prompt: str, json_schema: dict[str, Any] | None, max_tokens: int | None = None
    ) -> ModelAnswer:
        req = TextCompletionRequest(system=system, prompt=prompt, json_schema=json_schema, max_tokens=max_tokens)
        res = await self._call(TEXT_COMPLETION, req, self.model_timeout)
        return ModelAnswer(res.response, res.model or "", res.in_token or 0, res.out_token or 0, res.configured)

    @uses(TRIPLES)
    async def neighbour_relations(
        self, t: Tenant, entities: Sequence[str], vector: list[float], limit: int
    ) -> list[RelationshipRef]:
        q = NeighboursQuery(
            user=t.user,
            collection=t.collection,
            scope=t.scope,
            entities=list(entities),
            limit_per_entity=CANDIDATES_PER_ENTITY,
            query_vector=vector,
            max_returned=limit,
        )
        res = await self._call(TRIPLES, q)
        return [
            RelationshipRef(s=x.s.value, p=x.p.value, o=x.o.value, weight=x.score or 0.0, score=x.score)
            for x in res.triples
            if x.o.is_iri
        ]

    @uses(DOCUMENTS)
    async def search_relations(self, t: Tenant, vector: list[float], limit: int) -> list[RelationshipRef]:
        req = SearchRelations(user=t.user, collection=t.collection, scope=t.scope, vector=vector, limit=limit)
        return (await self._call(DOCUMENTS, req)).relations

    @uses(DOCUMENTS)
    async def entity_chunks(self, t: Tenant, entities: Sequence[str], per_entity: int) -> list[Mention]:
        return await self.links(t, entities, [], per_entity)

    @uses(DOCUMENTS)
    async def relation_chunks(
        self, t: Tenant, relations: Sequence[tuple[str, str, str]], per_relation: int
    ) -> list[tuple[tuple[str, str, str], str]]:
        req = RelationChunks(user=t.user, collection=t.collection, scope=t.scope, relations=list(relations),
                             per_relation=per_relation)  # fmt: skip
        return (await self._call(DOCUMENTS, req)).relation_chunks

    @uses(DOCUMENTS)
    async def episodes(
        self,
        t: Tenant,
        entities: Sequence[str],
        chunk_ids: Sequence[str],
        window: tuple[datetime, datetime] | None,
    ) -> tuple[dict[str, list[str]], dict[str, int]]:
        since, until = window or (None, None)
        req = EpisodeMentions(user=t.user, collection=t.collection, scope=t.scope, entities=list(entities),
                              chunk_ids=list(chunk_ids), since=since, until=until)  # fmt: skip
        res = await self._call(DOCUMENTS, req)
        return res.chunk_mentions, res.episodes

    @uses(TRIPLES)
    async def distances(self, t: Tenant, search: DistanceSearch) -> Distances:
        q = DistancesQuery(user=t.user, collection=t.collection, scope=t.scope, sources=search.sources,
                           targets=search.targets, max_distance=search.max_distance,
                           limit_per_entity=search.per_entity, max_frontier=search.max_frontier)  # fmt: skip
        res = await self._call(TRIPLES, q)
        return Distances(res.hops, res.levels, res.truncated)

    @uses(GRAPH_EMBEDDINGS)
    async def entity_similarities(self, t: Tenant, vector: list[float], iris: Sequence[str]) -> dict[str, float]:
        req = GraphEmbeddingsRequest(user=t.user, collection=t.collection, scope=t.scope, vector=vector,
                                     iris=list(iris))  # fmt: skip
        return (await self._call(GRAPH_EMBEDDINGS, req)).similarities

    @uses(DOCUMENTS)
    async def chunk_similarities(self, t: Tenant, vector: list[float], chunk_ids: Sequence[str]) -> dict[str, float]:
        req = ChunkSimilarities(user=t.user, collection=t.collection, scope=t.scope, vector=vector,
                                chunk_ids=list(chunk_ids))  # fmt: skip
        return (await self._call(DOCUMENTS, req)).similarities

    @uses(RERANKER)
    async def rerank(self, req: RerankRequest) -> RerankResponse:
        return await self._call(RERANKER, req)


def _seeds(found: Sequence[EntityMatch], warnings: Sequence[Notice]) -> list[SeedEntity]:
    """Seed entities as retrieval takes them; the collection's notices go to the request's
    (`collecting_notices`)."""
    if (notices := _NOTICES.get()) is not None:
        notices.extend(w for w in warnings if w not in notices)
    return [SeedEntity(id=m.entity.value, label=m.label, score=m.score, lexical=m.lexical) for m in found]
