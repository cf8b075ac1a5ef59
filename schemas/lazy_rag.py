"""lazy-rag: query-time summaries over the graph that documents built (no index-time summaries)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from schemas.answers import Evidence, ModelUse
from schemas.base import MAX_QUERY_CHARS, Notice, Response, ScopedRequest
from schemas.documents import Scope
from schemas.retrieval import RerankerChoice, RetrievalStats

MAX_TIMEOUT_S = 3600.0  # the longest a request may ask for (a slow local model on a busy machine)


class LazyRagParams(BaseModel):
    """The knobs a request may set over its flow's (unset: the flow's value)."""

    max_hops: int | None = Field(default=None, ge=0, le=4)
    max_entities: int | None = Field(default=None, ge=1, le=500)
    chunk_limit: int | None = Field(default=None, ge=1, le=100)
    use_communities: bool | None = None
    timeout_s: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S)
    reranker: RerankerChoice | None = None
    bridge_seeds: int | None = Field(default=None, ge=0, le=10)  # best chunks whose names get a follow-up search


class LazyRagRequest(ScopedRequest, LazyRagParams):
    """A question; `expand` retrieves only (subgraph, chunks, scores), never calls a model."""

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    operation: Literal["query", "expand"] = "query"
    scope: Scope | None = None
    no_llm: bool = False
    streaming: bool = False


class LazyRagResponse(Response, Evidence, ModelUse):
    """The summary (or retrieval-only answer), what it rests on, and the cost."""

    response: str = ""  # the summary; with no model, a retrieval-only answer
    message_type: Literal["progress", "chunk", "answer"] = "answer"
    confidence: float = 0.0
    missing_info: list[str] = []
    no_data_found: bool = False
    stats: RetrievalStats | None = None
    warnings: list[Notice] = []  # e.g. the model did not answer (the retrieval-only answer stands)
