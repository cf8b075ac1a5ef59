"""Triples service: pattern queries, batched neighbours, batched labels."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, RootModel

from schemas.base import Response, ScopedRequest
from schemas.scope import Scope
from schemas.terms import Term, Triple

MAX_BATCH = 5000


class PatternQuery(ScopedRequest):
    """Triples matching a pattern; unset positions are wildcards."""

    operation: Literal["pattern"] = "pattern"
    s: Term | None = None
    p: Term | None = None
    o: Term | None = None
    limit: int = Field(default=10000, ge=1, le=100000)


class NeighboursQuery(ScopedRequest):
    """Edges touching any of `entities`, both directions, in one store round trip.

    This one value object carries a neighbour query end to end: graph-rag builds it, the
    triples service passes it on, every store reads it.

    Per entity and direction the store reads its first `limit_per_entity` edges in key order
    (predicate, then far end), plus up to `focus_limit` edges for each `focus` predicate.
    With `query_vector`, the store scores each candidate edge against the question (from label
    embeddings stored at load time) and returns the best `max_returned`; an entity's relations
    continue its path in `paths` when it has one.
    """

    operation: Literal["neighbours"] = "neighbours"
    entities: list[str] = Field(min_length=1, max_length=MAX_BATCH)
    limit_per_entity: int = Field(default=30, ge=1, le=10000)
    direction: Literal["both", "out", "in"] = "both"
    query_vector: list[float] | None = None
    # Scored edges to return. Not the user's edge limit: a traversal asks for its hop budget plus
    # one edge per frontier entity, as edges back to the previous level come again and are dropped.
    max_returned: int | None = Field(default=None, ge=1, le=100000)
    focus: list[str] = Field(default=[], max_length=1000)
    focus_limit: int = Field(default=0, ge=0, le=10000)
    # entity → the relations that led to it (at most one per hop; graph-rag allows 8 hops)
    paths: dict[str, Annotated[list[str], Field(max_length=16)]] = Field(default={}, max_length=MAX_BATCH)
    # Only relations with a source chunk in the scope (triples loaded without documents have none).
    scope: Scope | None = None


class AdjacencyQuery(ScopedRequest):
    """The (s, o) pairs of the edges between entities that touch any of `entities`, both
    directions: the edges a neighbour query reads first (each entity's first `limit_per_entity`
    per direction in key order), label and literal edges left out, no scores. What a graph
    search needs, in one round trip; with `scope`, only relations with a source chunk in it."""

    operation: Literal["adjacency"] = "adjacency"
    entities: list[str] = Field(min_length=1, max_length=MAX_BATCH)
    limit_per_entity: int = Field(default=30, ge=1, le=10000)
    scope: Scope | None = None


class DistancesQuery(ScopedRequest):
    """Hops from `sources` to the entities of `targets` (groups: a reranked result's entities),
    up to `max_distance`: a breadth-first search of adjacency reads, one store round trip per
    level for the whole frontier, run by the service so the search is one request. It stops
    once every group has an entity reached; edges as `AdjacencyQuery` reads them."""

    operation: Literal["distances"] = "distances"
    sources: list[str] = Field(min_length=1, max_length=MAX_BATCH)
    targets: list[list[str]] = Field(min_length=1, max_length=MAX_BATCH)
    max_distance: int = Field(default=3, ge=1, le=8)
    limit_per_entity: int = Field(default=30, ge=1, le=10000)
    max_frontier: int = Field(default=MAX_BATCH, ge=1, le=MAX_BATCH)  # entities read per level
    scope: Scope | None = None


class LabelsQuery(ScopedRequest):
    """`rdfs:label` of each IRI, in one round trip."""

    operation: Literal["labels"] = "labels"
    iris: list[str] = Field(min_length=1, max_length=MAX_BATCH)


class StoreTriples(ScopedRequest):
    """Write triples into the collection. Alone (the gateway's import), a whole load: stored, their
    entities' and relations' labels embedded, the load recorded. Within a load (`in_load`, after
    `BeginLoad`): stored only; the response names the IRIs whose label the batch changed
    (`fresh`: a new collection, none looked up)."""

    operation: Literal["store"] = "store"
    triples: list[Triple] = Field(min_length=1, max_length=MAX_BATCH)
    in_load: bool = False
    fresh: bool = False


class BeginLoad(ScopedRequest):
    """Begin a load of many batches (`kgflow load triples`): refused if the flow's embedding model is
    not the one the collection's vectors are of; else the collection is marked incomplete until
    `FinishLoad`."""

    operation: Literal["begin-load"] = "begin-load"
    source: str = Field(default="data", max_length=1000)


class EmbedLabels(ScopedRequest):
    """Within a load: embed the labels of `iris` (of `kind`) that lack a vector, with the flow's
    model. `labels` are those the load's triples gave; `keep` are IRIs whose label did not change:
    a vector they have is kept (every other IRI is embedded again)."""

    operation: Literal["embed-labels"] = "embed-labels"
    kind: Literal["entity", "predicate"] = "entity"
    iris: list[str] = Field(min_length=1, max_length=MAX_BATCH)
    labels: dict[str, str] = Field(default={}, max_length=MAX_BATCH)
    keep: list[str] = Field(default=[], max_length=MAX_BATCH)


class FinishLoad(ScopedRequest):
    """End a load: recorded finished (or, with `error`, failed and why); label caches are told."""

    operation: Literal["finish-load"] = "finish-load"
    stored: int = Field(default=0, ge=0)
    vectors: int = Field(default=0, ge=0)
    error: str | None = Field(default=None, max_length=1000)


class TriplesStoreRequest(RootModel):
    """Any `triples-store` request, told apart by `operation`."""

    root: Annotated[StoreTriples | BeginLoad | EmbedLabels | FinishLoad, Field(discriminator="operation")]


class TriplesStoreResponse(Response):
    """What a write did: triples stored, labels embedded; a load begun says whether its collection is
    new and which earlier load it completes; a batch of a load names the labels it changed."""

    stored: int = 0
    embedded: int = 0
    changed: list[str] = []
    fresh: bool = False
    repairing: str | None = None


class TriplesRequest(RootModel):
    """Any triples-service request (reads), told apart by `operation`. Writes go to `triples-store`
    (`StoreTriples`)."""

    root: Annotated[
        PatternQuery | NeighboursQuery | AdjacencyQuery | DistancesQuery | LabelsQuery,
        Field(discriminator="operation"),
    ]


class ScoredTriple(Triple):
    """A triple with the relevance score the store gave it (if any)."""

    score: float | None = None


class TriplesResponse(Response):
    """Triples for pattern/neighbour queries; labels for label queries."""

    triples: list[ScoredTriple] = []
    labels: dict[str, str] = {}
    pairs: list[tuple[str, str]] = []  # adjacency queries: (s, o)
    hops: dict[str, int] = {}  # distance queries: target entity -> hops from the nearest source (reached only)
    truncated: bool = False  # distance queries: a frontier was cut to max_frontier entities
    levels: int = 0  # distance queries: levels searched (an adjacency read each)
    rows_read: int = 0
    # an earlier kgflow's fields: taken from its processors, never sent or read (the stores' counts
    # travel beside the response, processors.accounting.usage; writes answer with TriplesStoreResponse)
    store_round_trips: int = Field(default=0, exclude=True)
    stored: int = Field(default=0, exclude=True)
