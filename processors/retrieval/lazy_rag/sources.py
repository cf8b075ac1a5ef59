"""What lazy-rag needs from the rest of the system (bus-free protocol; the service implements it
over the flow's clients, tests over fakes). Every call is one store round trip or one model call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from processors.models.text_completion.prompting import ModelAnswer
from processors.retrieval.common import ChunkSearchSource
from schemas.communities import CommunityInfo
from schemas.documents import Chunk, Mention, SearchMode
from schemas.extraction import ConceptMention
from schemas.graph_rag import SeedEntity
from schemas.reranker import RerankRequest, RerankResponse
from schemas.retrieval import RelationshipRef
from schemas.tenant import Tenant


class LazySources(ChunkSearchSource, Protocol):
    """Embedding, chunk and entity search, chunk-entity links, communities and the model."""

    async def embed(self, text: str) -> list[float]:
        """Vector of the question `text`."""
        ...

    async def embed_texts(self, texts: Sequence[str], query: bool = False) -> list[list[float]]:
        """Vectors of `texts` (questions when `query`), in order (one model call)."""
        ...

    async def search_many(
        self, t: Tenant, searches: Sequence[tuple[list[float], str]], limit: int, mode: SearchMode = "fused"
    ) -> list[list[Chunk]]:
        """`search_chunks` for each (vector, text), in one call (one store read)."""
        ...

    async def search_and_seed(
        self, t: Tenant, vector: list[float], text: str, limit: int, seeds: int
    ) -> tuple[list[Chunk], list[SeedEntity]]:
        """The best `limit` chunks by graphrank (`search_chunks` in graph mode) and the `seeds`
        entities the question names, then the nearest by vector: one call, on a server holding
        both one store round trip."""
        ...

    async def expand(
        self, t: Tenant, entities: Sequence[str], chunk_ids: Sequence[str], per_entity: int, hops: int,
        max_entities: int,
    ) -> list[Mention]:  # fmt: skip
        """The chunk-entity links (in scope) of `hops` levels of expansion from `entities` and
        `chunk_ids` (best first), each next level from the best `max_entities` entities
        (algorithms/expansion): one call, one store round trip."""
        ...

    async def chunks(self, t: Tenant, ids: Sequence[str]) -> list[Chunk]:
        """Chunks by id (in scope)."""
        ...

    async def labels(self, t: Tenant, iris: Sequence[str]) -> dict[str, str]:
        """Labels of entities."""
        ...

    async def relations(self, t: Tenant, entities: Sequence[str]) -> list[RelationshipRef]:
        """Relations among `entities` with a source chunk in scope, strongest first."""
        ...

    async def communities(
        self, t: Tenant, entities: Sequence[str], summarize: bool, limit: int
    ) -> tuple[list[CommunityInfo], int]:
        """The first `limit` level-0 communities of the entities (in their order), with summaries
        when `summarize`, and how many model calls writing summaries took."""
        ...

    async def context(
        self, t: Tenant, entities: Sequence[str], limit: int
    ) -> tuple[list[RelationshipRef], list[CommunityInfo], dict[str, str]]:
        """`relations`, the first `limit` communities of the entities without summaries and the
        entities' `labels`, in one call (on a server holding them all, one store round trip)."""
        ...

    async def concepts(self, text: str) -> list[ConceptMention]:
        """The concepts a text names (as indexing finds them)."""
        ...

    async def complete(self, system: str, prompt: str, json_schema: dict[str, Any] | None) -> ModelAnswer:
        """One model call."""
        ...

    async def rerank(self, req: RerankRequest) -> RerankResponse:
        """Rerank retrieved chunks (one call to the reranker)."""
        ...
