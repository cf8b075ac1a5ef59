"""reranker: graph-aware reranking of retrieved results (Zep-style, spec 001) as a service any
retrieval path can call.

Strategies (each result's signal is 0..1; `original` is the caller's score, min-max normalised
over the request):

- `semantic`: cosine of the question to the result's stored vector (chunk vectors, entity label
  vectors; a triple's text is embedded, or its entities' vectors averaged);
- `episode`: distinct timestamped documents ("episodes") inside the window that mention the
  result's entities, divided by the largest such count among the results;
- `distance`: 1 / (1 + d), d the fewest hops from a question entity to the result's nearest
  entity (0 beyond `max-distance` or disconnected);
- `hybrid`: original·w_original + episode·w_episode + distance·w_distance.

A single-signal strategy combines as original·w_original + signal·(1 − w_original). Ties keep
the input order.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from schemas.base import MAX_QUERY_CHARS, Response, ScopedRequest
from schemas.graph_rag import SeedEntity
from schemas.retrieval import RerankStrategy, RetrievalStats
from schemas.scope import Scope

Strategy = RerankStrategy
ResultKind = Literal["entity", "chunk", "triple"]
WEIGHT_TOLERANCE = 1e-6
MAX_RESULTS = 5000


class RerankWeights(BaseModel):
    """How the signals fuse; they must sum to 1.0 (within 1e-6)."""

    model_config = ConfigDict(extra="forbid")

    original: float = Field(default=0.4, ge=0, le=1)
    episode: float = Field(default=0.3, ge=0, le=1)
    distance: float = Field(default=0.3, ge=0, le=1)

    @model_validator(mode="after")
    def _sum_to_one(self) -> RerankWeights:
        total = self.original + self.episode + self.distance
        if abs(total - 1.0) > WEIGHT_TOLERANCE:
            raise ValueError(
                f"weights original={self.original:g}, episode={self.episode:g}, distance={self.distance:g} "
                f"sum to {total:.9g}; they must sum to 1.0 (within {WEIGHT_TOLERANCE:g})"
            )
        return self


class RerankItem(BaseModel):
    """A retrieved result: an entity (its IRI), a chunk (its id) or a triple (any id; its entities
    in `entity_ids`). A chunk's entities are the ones it mentions unless `entity_ids` is given."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=2048)
    kind: ResultKind
    score: float = 0.0
    entity_ids: list[str] | None = Field(default=None, max_length=256)
    text: str | None = Field(default=None, max_length=MAX_QUERY_CHARS)


class RerankerParams(BaseModel):
    """The knobs a request may set over the reranker's flow parameters (unset: the flow's value)."""

    strategy: Strategy | None = None
    weights: RerankWeights | None = None
    window_days: float | None = Field(default=None, gt=0, le=36_500)
    max_distance: int | None = Field(default=None, ge=1, le=8)


class RerankRequest(ScopedRequest, RerankerParams):
    """Results to reorder for a question, within user + collection (+ scope)."""

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    scope: Scope | None = None
    results: list[RerankItem] = Field(max_length=MAX_RESULTS)
    # The question's entities, used as given; else chosen from `seeds` (the caller's entity search
    # for this question) or from the reranker's own: named in the question, else the nearest.
    question_entities: list[str] | None = Field(default=None, max_length=200)
    seeds: list[SeedEntity] | None = Field(default=None, max_length=1000)
    # The question's vector when the caller has it (else it is embedded when a strategy needs it).
    vector: list[float] | None = Field(default=None, min_length=1)
    as_of: datetime | None = None  # the episode window ends here (default: now)


class GraphContext(BaseModel):
    """Why a result scored as it did."""

    episode_mentions: int = 0  # the most episodes in the window that mention one of its entities
    min_distance: int | None = None  # hops from the nearest question entity (None: not reached)
    nearest_entity: str | None = None  # the result's entity at `min_distance`
    episode_score: float = 0.0
    distance_score: float = 0.0
    semantic_score: float | None = None
    note: str | None = None


class RerankedResult(BaseModel):
    """A result with its scores; `index` is its position in the request."""

    id: str
    kind: ResultKind
    index: int
    original_score: float
    graph_score: float
    combined_score: float
    graph_context: GraphContext


class RerankResponse(Response):
    """The results, best first, and what reranking cost."""

    strategy: Strategy | None = None
    results: list[RerankedResult] = []
    question_entities: list[str] = []
    stats: RetrievalStats | None = None
