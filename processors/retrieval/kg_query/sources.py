"""What kg-query needs from the rest of the system (bus-free protocol)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from processors.models.text_completion.prompting import ModelAnswer
from processors.retrieval.common import ChunkSearchSource
from schemas.documents import Chunk, Mention
from schemas.graph_rag import SeedEntity
from schemas.reranker import RerankRequest, RerankResponse
from schemas.retrieval import RelationshipRef
from schemas.tenant import Tenant


class KgSources(ChunkSearchSource, Protocol):
    """Entity, relation and chunk search, their links, labels and the model."""

    async def embed(self, text: str) -> list[float]:
        """Vector of `text`."""
        ...

    async def seeds(self, t: Tenant, vector: list[float], text: str, limit: int) -> list[SeedEntity]:
        """Entities the question names, then the nearest by vector (in scope)."""
        ...

    async def neighbour_relations(
        self, t: Tenant, entities: Sequence[str], vector: list[float], limit: int
    ) -> list[RelationshipRef]:
        """The edges of `entities`, best matching the question first (in scope)."""
        ...

    async def search_relations(self, t: Tenant, vector: list[float], limit: int) -> list[RelationshipRef]:
        """Relations nearest the question (in scope)."""
        ...

    async def entity_chunks(self, t: Tenant, entities: Sequence[str], per_entity: int) -> list[Mention]:
        """Chunks mentioning each entity (in scope)."""
        ...

    async def relation_chunks(
        self, t: Tenant, relations: Sequence[tuple[str, str, str]], per_relation: int
    ) -> list[tuple[tuple[str, str, str], str]]:
        """Source chunks of each relation (in scope)."""
        ...

    async def chunks(self, t: Tenant, ids: Sequence[str]) -> list[Chunk]:
        """Chunks by id (in scope)."""
        ...

    async def labels(self, t: Tenant, iris: Sequence[str]) -> dict[str, str]:
        """Labels of entities and predicates."""
        ...

    async def complete(self, system: str, prompt: str, json_schema: dict[str, Any] | None) -> ModelAnswer:
        """One model call."""
        ...

    async def rerank(self, req: RerankRequest) -> RerankResponse:
        """Rerank merged chunks (one call to the reranker)."""
        ...
