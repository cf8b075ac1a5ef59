"""What every document-grounded retrieval service (lazy-rag, drift, kg-query) returns besides its
answer: the documents, chunks, entities and relationships it retrieved, and what it cost."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from schemas.base import MAX_QUERY_CHARS

# The reranker's strategies, and the flow parameter `reranker` of the services that can call it.
RerankStrategy = Literal["semantic", "episode", "distance", "hybrid"]
RerankerChoice = Literal["none", "semantic", "episode", "distance", "hybrid"]


# How chunks are ranked: dense, lexical (BM25), both fused by reciprocal rank, or graph-aware passage ranking.
SearchMode = Literal["fused", "vector", "lexical", "graph"]


class SearchText(BaseModel):
    """One search of a batch (a chunk search's `searches`): a question vector and its text."""

    vector: list[float] | None = None
    text: str | None = Field(default=None, max_length=MAX_QUERY_CHARS)


class DocumentRef(BaseModel):
    """A source document of the retrieved context, with the best score of its chunks."""

    id: str
    title: str = ""
    score: float = 0.0


class EntityRef(BaseModel):
    """A retrieved entity: why it was chosen (`seed`: found from the question) and how relevant."""

    id: str
    label: str | None = None
    score: float = 0.0
    seed: bool = False


class RelationshipRef(BaseModel):
    """A retrieved relationship between two entities (labels as a reader sees them)."""

    s: str
    p: str
    o: str
    s_label: str | None = None
    p_label: str | None = None
    o_label: str | None = None
    weight: float = 0.0
    score: float | None = None  # similarity to the query, in relation searches


class Citation(BaseModel):
    """A chunk that supports a statement: its id, a span of its text and its document."""

    chunk_id: str
    span: str = ""
    document_id: str = ""
    document_name: str = ""
    page: int | None = None  # the chunk's page (or slide) in its file, when the file has pages
    section: str = ""  # the heading the chunk falls under, when the file has headings


class RequestCost(BaseModel):
    """What a request cost: its time, and the stores' work, counted where each backend talks to
    its store (its own reads and those of the services it called), in total and per stage."""

    store_round_trips: int = 0  # store calls waited on: a SQLite read/write, a Cassandra batch, a Neo4j query
    store_requests: int = 0  # SQL statement batches, CQL requests (and pages), Cypher statements
    elapsed_ms: float = 0.0
    stage_ms: dict[str, float] = {}
    stage_store_round_trips: dict[str, int] = {}
    stage_store_requests: dict[str, int] = {}


class RetrievalStats(RequestCost):
    """What one request cost."""

    llm_calls: int = 0
    in_token: int = 0
    out_token: int = 0
