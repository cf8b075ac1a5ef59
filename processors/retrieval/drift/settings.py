"""drift's flow parameters: every default of the service, written once."""

from __future__ import annotations

from pydantic import BaseModel, Field

from schemas.drift import DriftParams, DriftRequest

MAX_TIMEOUT_S = 3600.0


class DriftSettings(BaseModel):
    """drift's flow parameters (a request may override the `DriftParams` names)."""

    passes: int = Field(default=2, ge=1, le=5)  # rounds of follow-ups
    max_llm_calls: int = Field(default=12, ge=2, le=100)  # the model is never called more often
    community_limit: int = Field(default=5, ge=1, le=50)  # communities the primer reads
    chunks_per_community: int = Field(default=3, ge=1, le=3)  # sample chunks per primer community
    followup_chunks: int = Field(default=8, ge=1, le=50)  # chunks retrieved per follow-up
    max_followups: int = Field(default=3, ge=1, le=10)  # follow-ups run per pass (concurrently)
    max_summaries: int = Field(default=2, ge=0, le=20)  # community summaries a request may write
    max_tokens: int = Field(default=800, ge=16, le=8192)  # completion budget of each model call
    timeout_s: float = Field(default=300.0, gt=0, le=MAX_TIMEOUT_S)  # the whole search; model calls wait within it
    stage_timeout_s: float = Field(default=30.0, gt=0)  # one store or embedding call
    heartbeat_s: float = Field(default=15.0, gt=0)  # progress repeated while a step takes longer
    neighbour_entities: int = Field(default=10, ge=0)  # entities of a follow-up's chunks expanded
    neighbour_relations: int = Field(default=20, ge=1)  # relations read from them, best first
    neighbour_chunks: int = Field(default=3, ge=0)  # chunks naming the related entities, kept
    prompt_chunks: int = Field(default=8, ge=1, le=50)  # passages shown to the model per prompt
    prompt_chunk_chars: int = Field(default=700, ge=50, le=10_000)
    novelty_weight: float = Field(default=0.5, ge=0, le=1)  # follow-up rank: novelty vs confidence
    min_novelty: float = Field(default=0.05, ge=0, le=1)  # below: a repeat of what was answered

    def for_request(self, req: DriftRequest) -> DriftSettings:
        """These settings with the request's overrides."""
        return self.model_copy(update=req.model_dump(include=set(DriftParams.model_fields), exclude_none=True))
