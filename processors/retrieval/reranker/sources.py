"""What the reranker needs from the rest of the system (bus-free protocol; the service implements
it over the flow's clients, tests over fakes). Every call is one store round trip or one model
call."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from processors.algorithms.bfs import Distances, DistanceSearch
from schemas.graph_rag import SeedEntity
from schemas.tenant import Tenant


class RerankSources(Protocol):
    """Embedding, entity search, chunk-entity links, episodes, frontier edges and stored vectors."""

    async def embed(self, text: str) -> list[float]:
        """Vector of `text`."""
        ...

    async def embed_texts(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of `texts`, in order (one model call)."""
        ...

    async def seeds(self, t: Tenant, vector: list[float], text: str, limit: int) -> list[SeedEntity]:
        """Entities the question names, then the nearest by vector (in scope)."""
        ...

    async def episodes(
        self, t: Tenant, entities: Sequence[str], chunk_ids: Sequence[str], window: tuple[datetime, datetime] | None
    ) -> tuple[dict[str, list[str]], dict[str, int]]:
        """The entities each of `chunk_ids` mentions (chunk id -> entities) and, with a window, per entity (given
        or mentioned) the distinct timestamped documents in it that mention it (in scope)."""
        ...

    async def distances(self, t: Tenant, search: DistanceSearch) -> Distances:
        """Hops from the search's sources to its targets' entities (in scope): one request, one
        store round trip per level searched."""
        ...

    async def entity_similarities(self, t: Tenant, vector: list[float], iris: Sequence[str]) -> dict[str, float]:
        """Cosine of `vector` to the stored label vector of each entity that has one (in scope)."""
        ...

    async def chunk_similarities(self, t: Tenant, vector: list[float], chunk_ids: Sequence[str]) -> dict[str, float]:
        """Cosine of `vector` to the stored vector of each chunk (in scope)."""
        ...
