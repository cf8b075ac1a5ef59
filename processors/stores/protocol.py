"""The store protocols every backend (sqlite/local, cassandra, neo4j) implements.

Every call is scoped by user and collection; every call is one store round trip.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from schemas.terms import Term, Triple

Direction = Literal["both", "out", "in"]


@dataclass(frozen=True)
class EntityHit:
    """An entity found by vector or label search."""

    iri: str
    label: str
    score: float
    lexical: bool = False


@dataclass
class NeighbourResult:
    """Edges found for a frontier, with the relevance score of each (None when unscored)."""

    triples: list[Triple]
    scores: list[float | None]
    rows_read: int


class TripleStore(Protocol):
    """Triples and their labels."""

    async def add_triples(self, user: str, collection: str, triples: Sequence[Triple]) -> int:
        """Store triples (duplicates ignored); rdfs:label triples also feed the label table."""
        ...

    async def pattern(
        self, user: str, collection: str, s: Term | None, p: Term | None, o: Term | None, limit: int
    ) -> list[Triple]:
        """Triples matching a pattern."""
        ...

    async def neighbours(
        self,
        user: str,
        collection: str,
        entities: Sequence[str],
        limit_per_entity: int,
        direction: Direction = "both",
        query_vector: Sequence[float] | None = None,
        edge_limit: int | None = None,
        focus: Sequence[str] = (),
        focus_limit: int = 0,
        paths: Mapping[str, Sequence[str]] | None = None,
    ) -> NeighbourResult:
        """Edges touching any of `entities` (label edges excluded), one round trip.

        Per entity and direction the store reads its first `limit_per_entity` edges in key
        order (predicate, then far end: the same edges on every backend), plus, for each
        `focus` predicate, up to `focus_limit` edges with that predicate, so a hub's edges
        that matter to the question are read however many others it has. `paths` holds, for
        frontier entities reached by earlier hops, the relations that led to them (scoring).
        """
        ...

    async def labels(self, user: str, collection: str, iris: Sequence[str]) -> dict[str, str]:
        """Label of each IRI that has one."""
        ...

    async def delete_collection(self, user: str, collection: str) -> None:
        """Drop every triple of the collection."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


class EntityIndex(Protocol):
    """Entity (and predicate) label vectors plus lexical label search."""

    async def upsert(
        self,
        user: str,
        collection: str,
        items: Sequence[tuple[str, str, Sequence[float]]],
        kind: Literal["entity", "predicate"] = "entity",
    ) -> None:
        """Store (iri, label, vector) items."""
        ...

    async def search(
        self, user: str, collection: str, vector: Sequence[float] | None, text: str | None, limit: int
    ) -> list[EntityHit]:
        """Nearest entities to `vector`, merged with entities whose label `text` names."""
        ...

    async def vectors(self, user: str, collection: str, iris: Sequence[str]) -> dict[str, list[float]]:
        """Stored vectors of these IRIs (entities or predicates)."""
        ...

    async def nearest_predicates(
        self, user: str, collection: str, vector: Sequence[float], limit: int
    ) -> list[EntityHit]:
        """The `limit` predicates whose label vectors are nearest to `vector`, best first."""
        ...

    async def similarities(
        self, user: str, collection: str, vector: Sequence[float], iris: Sequence[str]
    ) -> dict[str, float]:
        """Cosine of `vector` to the stored vector of each of `iris` that has one."""
        ...

    async def delete_collection(self, user: str, collection: str) -> None:
        """Drop the collection's vectors."""
        ...

    async def close(self) -> None:
        """Release resources."""
        ...
