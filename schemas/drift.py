"""drift: DRIFT search over the communities of a collection (spec 004) — a HyDE-expanded primer
over the top community level, ranked follow-ups answered from chunks scoped to their target
communities, and an aggregated answer with key facts whose citations are retrieved chunks."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from schemas.answers import Evidence
from schemas.base import MAX_QUERY_CHARS, Notice, Response, ScopedRequest
from schemas.documents import Scope
from schemas.retrieval import Citation, RetrievalStats

Phase = Literal[
    "initializing",
    "expanding_query",
    "retrieving_communities",
    "executing_followup",
    "aggregating_results",
    "completed",
    "error",
]


class DriftParams(BaseModel):
    """The knobs a request may set over its flow's (unset: the flow's value)."""

    passes: int | None = Field(default=None, ge=1, le=5)
    max_llm_calls: int | None = Field(default=None, ge=2, le=100)
    community_limit: int | None = Field(default=None, ge=1, le=50)
    chunks_per_community: int | None = Field(default=None, ge=1, le=3)
    followup_chunks: int | None = Field(default=None, ge=1, le=50)
    max_followups: int | None = Field(default=None, ge=1, le=10)
    max_summaries: int | None = Field(default=None, ge=0, le=20)
    max_tokens: int | None = Field(default=None, ge=16, le=8192)
    prompt_chunks: int | None = Field(default=None, ge=1, le=50)
    prompt_chunk_chars: int | None = Field(default=None, ge=50, le=10_000)
    timeout_s: float | None = Field(default=None, gt=0, le=3600)


class DriftRequest(ScopedRequest, DriftParams):
    """A question. With `streaming` (the default) progress responses come before the answer."""

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    scope: Scope | None = None
    no_llm: bool = False
    streaming: bool = True


class DriftProgress(BaseModel):
    """Where a DRIFT search is: its phase, how far along (0-100) and a line for a person."""

    phase: Phase
    progress_pct: int = Field(ge=0, le=100)
    thought_summary: str
    details_md: str = ""
    timestamp: datetime


class KeyFact(BaseModel):
    """A fact of the answer and the chunks that support it (a bare chunk id when the chunk was
    retrieved but its text and document are not known)."""

    fact: str
    citations: list[Citation | str] = []


class FollowUp(BaseModel):
    """A node of the Q/A tree: a follow-up question, where it looked and what it found."""

    question: str
    target_communities: list[str] = []
    depth: int = 1  # 1: proposed by the primer; n: by an answer at depth n - 1
    priority: float = 0.0  # the score it was ranked by (confidence and novelty)
    answer: str = ""
    citations: list[Citation | str] = []  # as in KeyFact
    confidence: float = 0.0
    should_continue: bool = False
    chunks: list[str] = []  # ids of the chunks retrieved for it, best first


class DriftStats(RetrievalStats):
    """What one DRIFT search cost, and what became of the model's citations."""

    max_llm_calls: int = 0
    summaries_written: int = 0
    followups_run: int = 0
    followups_skipped: int = 0  # proposed but not run (passes or the model-call budget)
    citations_returned: int = 0
    citations_dropped: int = 0  # cited ids that were not retrieved (hallucinated)
    unusable_outputs: int = 0  # model outputs that did not parse or conform (their calls count)


class DriftResponse(Response, Evidence):
    """A progress step (`message_type` "progress") or, last, the answer and what it rests on."""

    message_type: Literal["progress", "answer"] = "answer"
    progress: DriftProgress | None = None
    response: str = ""  # the final answer; with no model, a retrieval-only answer
    final_answer: str = ""
    key_facts: list[KeyFact] = []
    residual_uncertainty: str = ""
    no_data_found: bool = False
    initial_answer: str = ""  # the primer's
    followups: list[FollowUp] = []
    warnings: list[Notice] = []  # e.g. the collection is empty or unknown
    stats: DriftStats | None = None
    model: str | None = None
