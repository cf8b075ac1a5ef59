"""GraphRAG: a question in, an answer grounded in retrieved triples out."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from schemas.answers import ModelUse
from schemas.base import MAX_QUERY_CHARS, Notice, Response, ScopedRequest
from schemas.retrieval import RequestCost, RerankerChoice
from schemas.scope import Scope
from schemas.terms import LabelledTriple


class GraphRagParams(BaseModel):
    """The retrieval knobs a request may set over its flow's (unset: the flow's value). This class
    is their one definition: the CLI's `--param` names, the gateway's field names (kebab-case)
    and the overrides graph-rag applies are all derived from its fields."""

    entity_limit: int | None = Field(default=None, ge=1, le=1000)
    triple_limit: int | None = Field(default=None, ge=1, le=10000)
    max_subgraph_size: int | None = Field(default=None, ge=1, le=100000)
    max_path_length: int | None = Field(default=None, ge=1, le=8)
    edge_limit: int | None = Field(default=None, ge=1, le=10000)
    traversal: Literal["relevance", "bfs"] | None = None
    # Where traversal starts: `named`, the entities the question names (every hit when it names
    # none); `all`, every entity hit, as the classic algorithm does (the benchmark compares them).
    anchors: Literal["named", "all"] | None = None
    timeout_s: float | None = Field(default=None, gt=0, le=3600)
    reranker: RerankerChoice | None = None


class GraphRagRequest(ScopedRequest, GraphRagParams):
    """A question and the retrieval limits (gateway names in kebab-case)."""

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    streaming: bool = False
    no_llm: bool = False
    scope: Scope | None = None  # only entities and relations with a source chunk in the scope


class SeedEntity(BaseModel):
    """A seed entity and why it was chosen."""

    id: str
    label: str | None = None
    score: float
    lexical: bool = False
    anchor: bool = False  # traversal started here (the candidates it did not start from are only scored)


class GraphRagStats(RequestCost):
    """What one query cost."""

    rows_read: int = 0
    label_cache_hits: int = 0
    label_cache_misses: int = 0
    levels: int = 0


class GraphRagResponse(Response, ModelUse):
    """Answer text (or a streamed piece of it), the evidence, and the cost."""

    response: str = ""
    message_type: Literal["chunk", "explain", "answer"] = "answer"
    end_of_session: bool = True
    entities: list[SeedEntity] = []
    triples: list[LabelledTriple] = []
    sources: list[str] = []
    stats: GraphRagStats | None = None
    warnings: list[Notice] = []  # e.g. the collection is unknown or incomplete, the model unavailable
