"""kg-query: LightRAG's query modes (local, global, hybrid, mix, naive) with token budgets."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from schemas.answers import ModelUse
from schemas.base import MAX_QUERY_CHARS, Notice, Response, ScopedRequest
from schemas.documents import Chunk, Scope
from schemas.retrieval import DocumentRef, EntityRef, RelationshipRef, RerankerChoice, RetrievalStats

Mode = Literal["local", "global", "hybrid", "mix", "naive"]


class KgQueryParams(BaseModel):
    """The knobs a request may set over its flow's (unset: the flow's value)."""

    mode: Mode | None = None
    top_k: int | None = Field(default=None, ge=1, le=1000)  # entities (local) / relations (global) searched
    chunk_top_k: int | None = Field(default=None, ge=1, le=1000)  # chunks by vector (mix, naive)
    max_entity_tokens: int | None = Field(default=None, ge=0, le=1_000_000)
    max_relation_tokens: int | None = Field(default=None, ge=0, le=1_000_000)
    max_total_tokens: int | None = Field(default=None, ge=1, le=2_000_000)
    timeout_s: float | None = Field(default=None, gt=0, le=3600)
    reranker: RerankerChoice | None = None


class KgQueryRequest(ScopedRequest, KgQueryParams):
    """A question and how to gather its context."""

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    scope: Scope | None = None
    no_llm: bool = False


class TokenUse(BaseModel):
    """Tokens of each part of the context, as the flow's model counts them, and the budgets."""

    tokenizer: str = ""
    entities: int = 0
    relations: int = 0
    chunks: int = 0
    prompt: int = 0  # system prompt + question + the entity/relation context
    total: int = 0
    chunk_budget: int = 0
    max_total_tokens: int = 0


class KgQueryResponse(Response, ModelUse):
    """The answer (with a model), the structured context it was given, its references, the cost."""

    response: str = ""
    mode: Mode = "mix"
    entities: list[EntityRef] = []
    relationships: list[RelationshipRef] = []
    chunks: list[Chunk] = []
    documents: list[DocumentRef] = []
    references: list[DocumentRef] = []  # the documents of the chunks in the context
    context: str = ""  # the context text the model reads
    tokens: TokenUse | None = None
    no_data_found: bool = False
    stats: RetrievalStats | None = None
    warnings: list[Notice] = []  # e.g. the collection is empty, unknown, or incomplete (a load did not finish)
