"""Communities: hierarchical Leiden communities of a collection's concept graph, with profiles
(no model) and summaries written lazily by text-completion, cached against their membership."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, RootModel

from schemas.base import Response, ScopedRequest
from schemas.documents import Scope
from schemas.retrieval import RelationshipRef


class CommunityInfo(BaseModel):
    """A community as services and clients see it."""

    id: str
    level: int
    parent: str | None = None
    children: list[str] = []
    size: int = 0  # member entities
    chunks: int = 0
    top_entities: list[str] = []  # IRIs, most central first
    top_entity_labels: list[str] = []
    top_chunks: list[str] = []  # chunk ids, most representative first
    summary: str | None = None  # None until a query asks for one (the profile stands in)
    summary_model: str | None = None
    stale: bool = False  # a document it covers changed since it was built
    score: float | None = None  # similarity to the query, in searches


class BuildCommunities(ScopedRequest):
    """Rebuild the collection's communities from its concept graph (summaries of communities
    whose membership did not change are kept); with `update`, re-cluster only the communities
    writes flagged stale since the last build, and the concepts no community holds yet."""

    operation: Literal["build"] = "build"
    update: bool = False


class ListCommunities(ScopedRequest):
    """Communities of a level (all levels when unset), or by id, largest first."""

    operation: Literal["list"] = "list"
    level: int | None = Field(default=None, ge=0, le=16)
    ids: list[str] | None = Field(default=None, max_length=1000)
    limit: int = Field(default=1000, ge=1, le=100_000)
    scope: Scope | None = None


class SearchCommunities(ScopedRequest):
    """Communities nearest a vector: at `level`, else from the top level down (falling back a
    level while fewer than `limit / 2` match), or over every level when there is no hierarchy."""

    operation: Literal["search"] = "search"
    vector: list[float] = Field(min_length=1)
    level: int | None = Field(default=None, ge=0, le=16)
    limit: int = Field(default=5, ge=1, le=100)
    scope: Scope | None = None


class CommunitiesOf(ScopedRequest):
    """The communities (at `level`) the entities belong to: `membership`, and in `communities` the
    first `limit` of them in the entities' order (summarised when `summarize`, see
    `SummarizeCommunities`)."""

    operation: Literal["of-entities"] = "of-entities"
    entities: list[str] = Field(min_length=1, max_length=5000)
    level: int = Field(default=0, ge=0, le=16)
    limit: int = Field(default=5, ge=0, le=100)
    summarize: bool = False
    # not summarising: also the (at most) `relations` strongest relations among the entities with a
    # source chunk in scope (a neighbourhood's whole context in one call: one store round trip)
    relations: int = Field(default=0, ge=0, le=10_000)
    labels: bool = False  # not summarising: also the entities' labels (`labels`)
    scope: Scope | None = None  # the relations' sources and the communities' chunks in it


class SummarizeCommunities(ScopedRequest):
    """Summaries of these communities: cached ones as they are, the others written now by
    text-completion (and cached); with no model the profile text is returned, not cached."""

    operation: Literal["summarize"] = "summarize"
    ids: list[str] = Field(min_length=1, max_length=100)


class CommunitiesRequest(RootModel):
    """Any communities-service request (reads; a summary is written and cached the first time one is
    asked for), told apart by `operation`. A build goes to `community-build` (`BuildCommunities`)."""

    root: Annotated[
        ListCommunities | SearchCommunities | CommunitiesOf | SummarizeCommunities,
        Field(discriminator="operation"),
    ]


class CommunitiesResponse(Response):
    """Communities, or what a build did."""

    communities: list[CommunityInfo] = []
    membership: dict[str, str] = {}  # of-entities: entity -> community id
    relations: list[RelationshipRef] = []  # of-entities with `relations`: strongest first
    labels: dict[str, str] = {}  # of-entities with `labels`: entity -> label
    levels: dict[int, int] = {}  # build: communities per level
    build_ms: float = 0.0
    llm_calls: int = 0
    in_token: int = 0
    out_token: int = 0
