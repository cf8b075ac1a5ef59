"""The specs' own REST contracts, served by the gateway beside the TrustGraph-style routes.

- LazyRAG (spec 000): `POST /api/v1/lazy-rag/query` and `/api/v1/lazy-rag/expand` (retrieval only),
  answered in the spec's wrapper `{"data": {...}, "meta": {"requestId", "timestamp"}}`.
- DRIFT (spec 004): `POST /retrieve` with `query`, `top_k` and `project_id` (the collection); nothing
  found is a 200 with `no_data_found: true`. Its progress messages (`phase`, `progress_pct`) come as
  server-sent events when the client asks for `text/event-stream`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.answers import Evidence
from schemas.base import MAX_QUERY_CHARS, CollectionName, Notice
from schemas.documents import Scope
from schemas.drift import DriftStats, FollowUp, KeyFact, Phase
from schemas.retrieval import DocumentRef, RerankerChoice, RetrievalStats

# A workspace a body names, resolved against the caller's token (a bound token may name only its own).
WorkspaceName = Annotated[str, Field(min_length=1, max_length=256)]


class SpecRequest(BaseModel):
    """What every spec route's body shares: unknown fields are refused, so a typo is a 400."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    workspace: WorkspaceName | None = None
    no_llm: bool = False


class LazyRagApiRequest(SpecRequest):
    """A LazyRAG query. `tenant_id` (the spec's name) is the workspace; `collection` defaults to `default`.
    The knobs are LazyRagParams' (unset: the flow's); the time budget is the flow's, so a request cannot
    turn an answer into a gateway timeout."""

    max_hops: int | None = Field(default=None, ge=0, le=4)
    max_entities: int | None = Field(default=None, ge=1, le=500)
    chunk_limit: int | None = Field(default=None, ge=1, le=100)
    use_communities: bool | None = None
    reranker: RerankerChoice | None = None
    tenant_id: WorkspaceName | None = None
    collection: CollectionName = "default"
    scope: Scope | None = None


class ApiMeta(BaseModel):
    """The spec's response metadata."""

    requestId: str  # noqa: N815 - the spec's field name
    timestamp: datetime


class LazyRagResult(Evidence):
    """A LazyRAG result: the query-time summary and the subgraph it rests on (`expand`: no summary)."""

    query: str
    summary: str = ""
    confidence: float = 0.0
    missing_info: list[str] = []
    no_data_found: bool = False
    generation_time_ms: float = 0.0
    warnings: list[Notice] = []
    stats: RetrievalStats | None = None
    model: str | None = None


class LazyRagApiResponse(BaseModel):
    """`{"data": LazyRagResult, "meta": ApiMeta}`."""

    data: LazyRagResult
    meta: ApiMeta


class RetrieveRequest(SpecRequest):
    """A DRIFT search: `project_id` is the collection, `top_k` the communities the primer reads."""

    top_k: int = Field(default=5, ge=1, le=50)
    project_id: CollectionName = "default"
    scope: Scope | None = None


class RetrieveResponse(BaseModel):
    """DRIFT's answer; `no_data_found` (still a 200) when the collection holds nothing for the query."""

    final_answer: str = ""
    key_facts: list[KeyFact] = []
    residual_uncertainty: str = ""
    no_data_found: bool = False
    retrieval_id: str = ""
    followups: list[FollowUp] = []
    documents: list[DocumentRef] = []
    warnings: list[Notice] = []
    stats: DriftStats | None = None
    model: str | None = None


class RetrievalProgress(BaseModel):
    """One progress message of a DRIFT search (the spec's `ui:retrieval_progress` message)."""

    message_type: Literal["retrieval_progress"] = "retrieval_progress"
    project_id: str
    retrieval_id: str
    phase: Phase
    progress_pct: int = Field(ge=0, le=100)
    thought_summary: str
    details_md: str = ""
    message_id: str
    timestamp: datetime


class ErrorDetail(BaseModel):
    """What failed: its type (`bad-request`, `unknown-flow`, ...) and a message for a person."""

    type: str
    message: str


class ApiError(BaseModel):
    """An error of the REST and spec routes: `{"error": {"type", "message"}}`."""

    error: ErrorDetail
