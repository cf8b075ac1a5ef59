"""The store protocols every backend (sqlite/local, cassandra, neo4j) implements.

Every call takes a `Tenant` (user + collection, inside every query); every call is one store round trip.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from processors.accounting.refusal import StoreRefusal
from processors.algorithms.bfs import Distances, DistanceSearch
from processors.algorithms.edges import NeighbourResult
from schemas.tenant import Tenant
from schemas.terms import Term, Triple
from schemas.triples import NeighboursQuery

VectorItem = tuple[str, str, Sequence[float]]  # (iri, label, vector)
VectorKind = Literal["entity", "predicate"]
VECTOR_DIMENSIONS = 384  # the size of every stored vector: the local embedding model's output


def int_literal(n: int) -> str:
    """An integer for schema text (DDL takes no parameters); anything but an int is refused."""
    if type(n) is not int:
        raise TypeError(f"expected an int, got {type(n).__name__}")
    return str(n)


@dataclass(frozen=True)
class VectorModel:
    """The embedding model a collection's vectors were made by, and their dimension."""

    name: str
    dimensions: int

    def __str__(self) -> str:
        return f"{self.name or 'an unnamed model'} ({self.dimensions} dimensions)"

    @classmethod
    def of(cls, items: Sequence[VectorItem], name: str) -> VectorModel:
        """The model of vectors about to be written: `name`, and the dimension they all share (a
        write of mixed dimensions is refused)."""
        dims = {len(v) for _, _, v in items}
        if len(dims) > 1:
            raise ValueError(f"vectors of {name} with different dimensions {sorted(dims)} in one write")
        return cls(name, dims.pop() if dims else 0)

    def require(self, collection: str, held: VectorModel | None) -> None:
        """Refuse (VectorModelMismatch) unless the collection holds no vectors yet, or these model's."""
        if held is not None and held != self:
            raise VectorModelMismatch(collection, held, self)

    def require_dimensions(self, index: str) -> None:
        """Refuse what a server's vector index cannot hold (its dimension is fixed in its schema)."""
        if self.dimensions != VECTOR_DIMENSIONS:
            raise ValueError(
                f"the {index} entity index holds vectors of {VECTOR_DIMENSIONS} dimensions; {self.name} makes "
                f"{self.dimensions}: use a model of {VECTOR_DIMENSIONS} dimensions, or the local vector index"
            )


class VectorModelMismatch(StoreRefusal):
    """Vectors of another model or dimension than the collection holds: similarities across two
    models mean nothing, so the write is refused (nothing of it is stored)."""

    def __init__(self, collection: str, held: VectorModel, offered: VectorModel) -> None:
        super().__init__(
            f"collection {collection!r} holds vectors of {held}; refusing vectors of {offered} "
            f"(similarities between two models mean nothing): load with a flow whose embeddings are {held.name}, "
            "or into another collection, or delete this collection first"
        )
        self.held, self.offered = held, offered


@dataclass(frozen=True)
class EntityHit:
    """An entity found by vector or label search."""

    iri: str
    label: str
    score: float
    lexical: bool = False


@dataclass(frozen=True)
class LoadState:
    """A collection's last load as the loader records it: written unfinished before its first
    triple, finished after its last vector. An unfinished state is what queries report."""

    started: float  # epoch seconds
    finished: float | None = None
    source: str = ""  # what was loaded (a file name, `import`)
    triples: int = 0  # new triples the load stored
    vectors: int = 0  # labels it embedded
    error: str | None = None  # why it stopped, when it failed rather than was killed

    @property
    def complete(self) -> bool:
        """True once the load finished (every triple and vector written)."""
        return self.finished is not None

    def row(self) -> tuple[float, float | None, str, int, int, str | None]:
        """The fields in storage order (started, finished, source, triples, vectors, error)."""
        return (self.started, self.finished, self.source, self.triples, self.vectors, self.error)

    def describe(self, collection: str) -> str:
        """Why the collection is incomplete, for a query's warning."""
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started))
        how = f"failed: {self.error}" if self.error else "did not finish (interrupted or still running)"
        return (
            f"collection {collection!r} is incomplete: the load of {self.source or 'data'} started {when} {how}; "
            "answers may miss facts. Load the same data again to complete it."
        )


@runtime_checkable
class HeldDistances(Protocol):
    """A triple store that runs a whole distance search where it holds the graph (the embedded
    store, in memory): one store round trip instead of one per level."""

    async def distances(self, tenant: Tenant, search: DistanceSearch) -> Distances | None:
        """The search's target hops, as `shortest_distances` over `adjacent` finds them (None:
        this collection is not held; search level by level)."""
        ...


class TripleStore(Protocol):
    """Triples and their labels."""

    async def add_triples(self, tenant: Tenant, triples: Sequence[Triple], replace_labels: bool = False) -> int:
        """Store triples (duplicates ignored); rdfs:label triples also feed the label table. With
        `replace_labels`, an IRI's label triple (the batch's last) replaces the label it has
        instead of adding a second one."""
        ...

    async def pattern(self, tenant: Tenant, s: Term | None, p: Term | None, o: Term | None, limit: int) -> list[Triple]:
        """Triples matching a pattern."""
        ...

    async def neighbours(self, query: NeighboursQuery) -> NeighbourResult:
        """Edges touching any of `query.entities` (label edges excluded), one round trip.

        Per entity and direction the store reads its first `limit_per_entity` edges in key
        order (predicate, then far end: the same edges on every backend), plus, for each
        `focus` predicate, up to `focus_limit` edges with that predicate, so a hub's edges
        that matter to the question are read however many others it has; then it ranks them
        with `rank_neighbours` (scored only with a query vector).
        """
        ...

    async def adjacent(self, tenant: Tenant, entities: Sequence[str], limit_per_entity: int) -> list[tuple[str, str]]:
        """(s, o) of the edges between entities that `neighbours` reads first for `entities`
        (each entity's first `limit_per_entity` per direction in key order; label and literal
        edges left out), unscored: a graph search's level in one round trip."""
        ...

    async def labels(self, tenant: Tenant, iris: Sequence[str]) -> dict[str, str]:
        """Label of each IRI that has one."""
        ...

    async def remove_triples(self, tenant: Tenant, triples: Sequence[Triple]) -> None:
        """Delete these triples (absent ones are ignored); rdfs:label triples also leave the label table."""
        ...

    async def collections(self, user: str) -> dict[str, int]:
        """The user's collections and how many triples each holds."""
        ...

    async def delete_collection(self, tenant: Tenant) -> None:
        """Drop every triple of the collection (and its load state)."""
        ...

    async def load_state(self, tenant: Tenant) -> LoadState | None:
        """The collection's last recorded load (None: never loaded through a loader that records)."""
        ...

    async def set_load_state(self, tenant: Tenant, state: LoadState) -> None:
        """Record the collection's load state (durably, before the call returns)."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


class EntityIndex(Protocol):
    """Entity (and predicate) label vectors plus lexical label search."""

    async def upsert(
        self, tenant: Tenant, items: Sequence[VectorItem], kind: VectorKind = "entity", *, model: str
    ) -> None:
        """Store (iri, label, vector) items made by embedding model `model`. The collection's first
        write records the model and the vectors' dimension; a write of another model or dimension
        is refused with VectorModelMismatch, naming both, and stores nothing."""
        ...

    async def vector_model(self, tenant: Tenant) -> VectorModel | None:
        """The model and dimension of the collection's vectors (None: none recorded yet)."""
        ...

    async def search(
        self, tenant: Tenant, vector: Sequence[float] | None, text: str | None, limit: int
    ) -> list[EntityHit]:
        """Nearest entities to `vector`, merged with entities whose label `text` names."""
        ...

    async def vectors(self, tenant: Tenant, iris: Sequence[str]) -> dict[str, list[float]]:
        """Stored vectors of these IRIs (entities or predicates)."""
        ...

    async def nearest_predicates(self, tenant: Tenant, vector: Sequence[float], limit: int) -> list[EntityHit]:
        """The `limit` predicates whose label vectors are nearest to `vector`, best first."""
        ...

    async def similarities(self, tenant: Tenant, vector: Sequence[float], iris: Sequence[str]) -> dict[str, float]:
        """Cosine of `vector` to the stored vector of each of `iris` that has one."""
        ...

    async def named(self, tenant: Tenant, names: Sequence[str]) -> dict[str, str]:
        """Normalised name -> the entity labelled so (the first IRI when several are), for the names
        that label an entity: how a concept found in text becomes the entity it names."""
        ...

    async def delete(self, tenant: Tenant, iris: Sequence[str]) -> None:
        """Drop these entities' vectors and names."""
        ...

    async def collections(self, user: str) -> dict[str, int]:
        """The user's collections and how many entities each indexes."""
        ...

    async def delete_collection(self, tenant: Tenant) -> None:
        """Drop the collection's vectors."""
        ...

    async def close(self) -> None:
        """Release resources."""
        ...
