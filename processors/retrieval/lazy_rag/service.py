"""lazy-rag processor: binds a long-lived LazyRag per flow to the bus."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from processors.base.client import RemoteError, RequestTimeout
from processors.base.errors import QueryTimeout, ServiceError
from processors.base.metrics import STAGE, STORE_ROUND_TRIPS
from processors.base.processor import FlowContext, FlowProcessor, ServiceSpec
from processors.base.settings import flow_params
from processors.retrieval.common import Completion, Tenant
from processors.retrieval.lazy_rag.rag import LazyRag
from processors.retrieval.lazy_rag.retrieve import LazyRagSettings
from schemas.communities import CommunitiesOf, CommunityInfo
from schemas.documents import Chunk, ChunkSearch, EntityChunks, EntityRelations, GetChunks, Mention
from schemas.embeddings import EmbeddingsRequest
from schemas.extraction import ConceptMention, ExtractRequest
from schemas.graph_embeddings import GraphEmbeddingsRequest
from schemas.graph_rag import SeedEntity
from schemas.labels import LabelRequest
from schemas.lazy_rag import LazyRagRequest, LazyRagResponse
from schemas.retrieval import RelationshipRef
from schemas.services import (
    COMMUNITIES,
    DOCUMENTS,
    EMBEDDINGS,
    EXTRACTOR,
    GRAPH_EMBEDDINGS,
    LABEL_RESOLVER,
    LAZY_RAG,
    TEXT_COMPLETION,
    Service,
)
from schemas.text_completion import TextCompletionRequest


class BusLazySources:
    """LazySources over the flow's clients; a call that fails or times out ends the request with
    a typed error."""

    def __init__(self, flow: FlowContext, stage_timeout_s: float) -> None:
        self.flow = flow
        self.timeout = stage_timeout_s

    async def _call(self, service: Service, req: BaseModel) -> Any:
        try:
            return await self.flow.client(service).request(req, timeout_s=self.timeout)
        except RequestTimeout:
            raise QueryTimeout(f"{service.name} did not answer within {self.timeout}s; query abandoned") from None
        except RemoteError as e:
            raise ServiceError(e.type, f"{service.name}: {e.message}") from None

    async def embed(self, text: str) -> list[float]:
        return (await self._call(EMBEDDINGS, EmbeddingsRequest(texts=[text]))).vectors[0]

    async def search_chunks(self, t: Tenant, vector: list[float], text: str, limit: int) -> list[Chunk]:
        req = ChunkSearch(user=t.user, collection=t.collection, scope=t.scope, vector=vector, text=text, limit=limit)
        return (await self._call(DOCUMENTS, req)).chunks

    async def seeds(self, t: Tenant, vector: list[float], text: str, limit: int) -> list[SeedEntity]:
        req = GraphEmbeddingsRequest(
            user=t.user, collection=t.collection, vector=vector, text=text, limit=limit, scope=t.scope
        )
        res = await self._call(GRAPH_EMBEDDINGS, req)
        return [SeedEntity(id=m.entity.value, label=m.label, score=m.score, lexical=m.lexical) for m in res.entities]

    async def links(
        self, t: Tenant, entities: Sequence[str], chunk_ids: Sequence[str], per_entity: int
    ) -> list[Mention]:
        req = EntityChunks(user=t.user, collection=t.collection, scope=t.scope, entities=list(entities),
                           chunk_ids=list(chunk_ids), per_entity=per_entity)  # fmt: skip
        links = (await self._call(DOCUMENTS, req)).links
        return links.mentions if links else []

    async def chunks(self, t: Tenant, ids: Sequence[str]) -> list[Chunk]:
        req = GetChunks(user=t.user, collection=t.collection, scope=t.scope, chunk_ids=list(ids))
        return (await self._call(DOCUMENTS, req)).chunks

    async def labels(self, t: Tenant, iris: Sequence[str]) -> dict[str, str]:
        if not iris:
            return {}
        return (
            await self._call(LABEL_RESOLVER, LabelRequest(user=t.user, collection=t.collection, iris=list(iris)))
        ).labels

    async def relations(self, t: Tenant, entities: Sequence[str]) -> list[RelationshipRef]:
        if not entities:
            return []
        req = EntityRelations(user=t.user, collection=t.collection, scope=t.scope, entities=list(entities))
        return (await self._call(DOCUMENTS, req)).relations

    async def communities(self, t: Tenant, entities: Sequence[str], summarize: bool) -> tuple[list[CommunityInfo], int]:
        if not entities:
            return [], 0
        req = CommunitiesOf(user=t.user, collection=t.collection, entities=list(entities), summarize=summarize)
        res = await self._call(COMMUNITIES, req)
        return res.communities, res.llm_calls

    async def concepts(self, text: str) -> list[ConceptMention]:
        return (await self._call(EXTRACTOR, ExtractRequest(texts=[text]))).mentions[0]

    async def complete(self, system: str, prompt: str, json_schema: dict[str, Any] | None) -> Completion:
        req = TextCompletionRequest(system=system, prompt=prompt, json_schema=json_schema)
        res = await self._call(TEXT_COMPLETION, req)
        return Completion(res.response, res.configured, res.model or "", res.in_token or 0, res.out_token or 0)


class LazyRagProcessor(FlowProcessor):
    """Serves `lazy-rag`."""

    name = LAZY_RAG.name

    def services(self) -> list[ServiceSpec]:
        return [ServiceSpec(LAZY_RAG, self.query)]

    def calls(self) -> list[Service]:
        return [EMBEDDINGS, DOCUMENTS, GRAPH_EMBEDDINGS, LABEL_RESOLVER, COMMUNITIES, EXTRACTOR, TEXT_COMPLETION]

    async def on_flow_start(self, flow: FlowContext) -> None:
        settings = flow_params(LazyRagSettings, flow.parameters)
        flow.state = LazyRag(BusLazySources(flow, settings.stage_timeout_s), settings)

    async def query(self, req: LazyRagRequest, flow: FlowContext) -> LazyRagResponse:
        """Retrieve and (unless `expand` or no model) summarise."""
        res = await flow.state.run(req)
        if res.stats:
            for stage, ms in res.stats.stage_ms.items():
                STAGE.labels(self.name, stage).observe(ms / 1000)
            STORE_ROUND_TRIPS.labels(self.name).inc(res.stats.store_round_trips)
        return res
