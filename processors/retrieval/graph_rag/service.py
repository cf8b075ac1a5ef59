"""Graph-rag processor: binds a long-lived GraphRag per flow to the bus."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from typing import TypeVar

from pydantic import BaseModel

from processors.algorithms.edges import NeighbourResult
from processors.base.client import RemoteError, RequestTimeout
from processors.base.errors import QueryTimeout, ServiceError
from processors.base.metrics import ROWS_READ, record_cost
from processors.base.processor import FlowContext
from processors.base.settings import flow_params
from processors.models.text_completion.backend import CompletionChunk
from processors.retrieval.bus_sources import call_service, uses
from processors.retrieval.graph_rag.rag import GraphRag, GraphRagSettings
from processors.retrieval.graph_rag.sources import GraphSources, LabelBatch, Seeds
from processors.retrieval.service import RetrievalProcessor
from schemas.base import Response
from schemas.embeddings import EmbeddingsRequest
from schemas.graph_embeddings import GraphEmbeddingsRequest
from schemas.graph_rag import GraphRagRequest, GraphRagResponse, GraphRagStats, SeedEntity
from schemas.labels import LabelRequest
from schemas.reranker import RerankRequest, RerankResponse
from schemas.services import (
    EMBEDDINGS,
    GRAPH_EMBEDDINGS,
    GRAPH_RAG,
    LABEL_RESOLVER,
    RERANKER,
    TEXT_COMPLETION,
    TRIPLES,
    Service,
)
from schemas.tenant import Tenant
from schemas.terms import Triple
from schemas.text_completion import TextCompletionRequest
from schemas.triples import NeighboursQuery

R = TypeVar("R", bound=Response)


class GraphBusSources:
    """GraphSources over the flow's request/response clients. Each call has the stage timeout;
    a stage that times out or fails ends the query with a typed error (not a redelivery)."""

    def __init__(self, flow: FlowContext[GraphRag], stage_timeout_s: float) -> None:
        self._flow = flow
        self._timeout = stage_timeout_s

    async def _call(self, service: Service[BaseModel, R], req: BaseModel) -> R:
        return await call_service(self._flow, service, req, self._timeout)

    @uses(EMBEDDINGS)
    async def embed(self, text: str) -> list[float]:
        res = await self._call(EMBEDDINGS, EmbeddingsRequest(texts=[text], query=True))
        return res.vectors[0]

    @uses(GRAPH_EMBEDDINGS)
    async def entities(self, scope: Tenant, vector: list[float], text: str, limit: int, predicates: int) -> Seeds:
        res = await self._call(
            GRAPH_EMBEDDINGS,
            GraphEmbeddingsRequest(user=scope.user, collection=scope.collection, vector=vector, text=text, limit=limit,
                                   predicate_limit=predicates, scope=scope.scope),
        )  # fmt: skip
        return Seeds(
            [SeedEntity(id=m.entity.value, label=m.label, score=m.score, lexical=m.lexical) for m in res.entities],
            [m.entity.value for m in res.predicates],
            res.warnings,
        )

    @uses(TRIPLES)
    async def neighbours(self, query: NeighboursQuery) -> NeighbourResult:
        res = await self._call(TRIPLES, query)
        return NeighbourResult(
            [Triple(s=t.s, p=t.p, o=t.o) for t in res.triples], [t.score for t in res.triples], res.rows_read
        )

    @uses(LABEL_RESOLVER)
    async def labels(self, scope: Tenant, iris: Sequence[str]) -> LabelBatch:
        res = await self._call(
            LABEL_RESOLVER, LabelRequest(user=scope.user, collection=scope.collection, iris=list(iris))
        )
        return LabelBatch(res.labels, res.cache_hits, res.cache_misses)

    @uses(RERANKER)
    async def rerank(self, req: RerankRequest) -> RerankResponse:
        return await self._call(RERANKER, req)

    @uses(TEXT_COMPLETION)
    async def complete(self, system: str, prompt: str, streaming: bool) -> AsyncIterator[CompletionChunk]:
        req = TextCompletionRequest(system=system, prompt=prompt, streaming=streaming)
        try:
            async for chunk in self._completion(req):
                yield chunk
        except RequestTimeout as e:
            raise QueryTimeout(f"{TEXT_COMPLETION.name}: {e}") from None
        except RemoteError as e:
            raise ServiceError(e.type, f"{TEXT_COMPLETION.name}: {e.message}") from None

    async def _completion(self, req: TextCompletionRequest) -> AsyncIterator[CompletionChunk]:
        async for res in self._flow.client(TEXT_COMPLETION).stream(req):
            if res.end_of_stream:
                yield CompletionChunk(
                    res.response,
                    final=True,
                    model=res.model or "",
                    in_token=res.in_token or 0,
                    out_token=res.out_token or 0,
                    extra={"configured": res.configured},
                )
            else:
                yield CompletionChunk(res.response)


class GraphRagProcessor(RetrievalProcessor[GraphRag, GraphRagRequest]):
    """Serves `graph-rag`: streams explain + answer chunks, or answers once."""

    name = GRAPH_RAG.name
    service, sources, bus_sources = GRAPH_RAG, GraphSources, GraphBusSources

    def build(self, flow: FlowContext[GraphRag]) -> GraphRag:
        settings = flow_params(GraphRagSettings, flow.parameters)
        return GraphRag(GraphBusSources(flow, settings.stage_timeout_s), settings)

    def _record(self, stats: GraphRagStats) -> None:
        """What one query cost, into the process's Prometheus metrics."""
        record_cost(self.name, stats)
        ROWS_READ.labels(self.name).inc(stats.rows_read)

    async def query(self, req: GraphRagRequest, flow: FlowContext[GraphRag]) -> AsyncIterator[GraphRagResponse]:
        """Retrieve, then answer (streamed when `req.streaming`)."""
        rag = flow.state
        found = await rag.retrieve(req)
        ranked = sorted(found.triples, key=lambda t: -(t.score or 0.0))  # stable: ties keep traversal order
        sources = list(dict.fromkeys(x for t in ranked for x in (t.s_id, t.o_id) if x))  # most relevant first
        if req.streaming:
            yield GraphRagResponse(
                message_type="explain",
                entities=found.seeds,
                triples=found.triples,
                end_of_stream=False,
                end_of_session=False,
                warnings=found.warnings,
            )
        text: list[str] = []
        async for a in rag.answer(req, found):
            piece = a.text
            if not a.final:
                text.append(piece)
                if req.streaming and piece:
                    yield GraphRagResponse(
                        message_type="chunk", response=piece, end_of_stream=False, end_of_session=False
                    )
                continue
            found.stats.elapsed_ms = round((time.perf_counter() - found.started) * 1000, 3)
            self._record(found.stats)
            full = "".join(text) + piece
            yield GraphRagResponse(
                response=piece if req.streaming else full,
                message_type="chunk" if req.streaming else "answer",
                entities=found.seeds,
                triples=found.triples,
                sources=sources,
                stats=found.stats,
                model=a.model,
                in_token=a.in_token,
                out_token=a.out_token,
                warnings=[*found.warnings, *a.warnings],
            )
