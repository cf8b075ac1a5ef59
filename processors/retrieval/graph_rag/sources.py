"""What GraphRAG needs from the rest of the system, as a protocol (bus-free)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from processors.algorithms.edges import NeighbourResult
from processors.models.text_completion.backend import CompletionChunk
from schemas.base import Notice
from schemas.graph_rag import SeedEntity
from schemas.reranker import RerankRequest, RerankResponse
from schemas.tenant import Tenant
from schemas.triples import NeighboursQuery


@dataclass
class Seeds:
    """Where traversal may start, and the predicates nearest to the question."""

    entities: list[SeedEntity]
    predicates: list[str]
    warnings: list[Notice] = field(default_factory=list)  # the collection is unknown or incomplete


@dataclass
class LabelBatch:
    """Resolved labels and how the label cache did."""

    labels: dict[str, str]
    cache_hits: int = 0
    cache_misses: int = 0


class GraphSources(Protocol):
    """Embedding, entity search, neighbours, labels and the language model."""

    async def embed(self, text: str) -> list[float]:
        """Vector of `text`."""
        ...

    async def entities(self, scope: Tenant, vector: list[float], text: str, limit: int, predicates: int) -> Seeds:
        """Entities near `vector`, entities the text names and the `predicates` nearest
        predicates (one request to the entity-search service)."""
        ...

    async def neighbours(self, query: NeighboursQuery) -> NeighbourResult:
        """Edges of a whole frontier, ranked (one request to the triples service)."""
        ...

    async def labels(self, scope: Tenant, iris: Sequence[str]) -> LabelBatch:
        """Labels of `iris` (one request to the label resolver, which reads what its cache misses)."""
        ...

    def complete(self, system: str, prompt: str, streaming: bool) -> AsyncIterator[CompletionChunk]:
        """The answer, streamed; a single final chunk with `extra['configured']=False` if no model."""
        ...

    async def rerank(self, req: RerankRequest) -> RerankResponse:
        """Rerank retrieved triples (one call to the reranker)."""
        ...
