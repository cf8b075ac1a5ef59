"""Entity search: nearest entities by vector, plus lexical label matches."""

from __future__ import annotations

from pydantic import BaseModel, Field

from schemas.base import MAX_QUERY_CHARS, Notice, Response, ScopedRequest
from schemas.scope import Scope
from schemas.terms import Term


class GraphEmbeddingsRequest(ScopedRequest):
    """Find entities near `vector`; with `text`, also entities whose label the text names;
    with `predicate_limit`, also the predicates whose labels are nearest to `vector`. With
    `iris`, no search: the cosine of `vector` to each of those entities' stored label vectors."""

    vector: list[float] = Field(min_length=1)
    limit: int = Field(default=20, ge=1, le=1000)
    text: str | None = Field(default=None, max_length=MAX_QUERY_CHARS)
    predicate_limit: int = Field(default=0, ge=0, le=1000)
    scope: Scope | None = None  # only entities a chunk in the scope mentions
    iris: list[str] | None = Field(default=None, max_length=50_000)


class EntityMatch(BaseModel):
    """An entity and its similarity score (1.0 for an exact label match)."""

    entity: Term
    score: float
    label: str | None = None
    lexical: bool = False


class GraphEmbeddingsResponse(Response):
    """Matches, best first."""

    entities: list[EntityMatch] = []
    predicates: list[EntityMatch] = []
    warnings: list[Notice] = []  # the collection is unknown or incomplete
    similarities: dict[str, float] = {}  # iri -> cosine, for a request's `iris` (those with a vector)
