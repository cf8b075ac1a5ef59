"""What drift needs from the rest of the system (bus-free protocol; the service implements it
over the flow's clients, tests over fakes). Every call is one store round trip or one model call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from processors.models.text_completion.prompting import ModelAnswer
from processors.retrieval.common import ChunkSearchSource, Usage
from schemas.communities import CommunityInfo
from schemas.documents import Chunk, Mention
from schemas.retrieval import RelationshipRef
from schemas.tenant import Tenant


class DriftSources(ChunkSearchSource, Protocol):
    """Embeddings, community and chunk search, the graph around chunks, and the model."""

    async def embed_texts(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of `texts`, in order."""
        ...

    async def search_communities(self, t: Tenant, vector: list[float], limit: int) -> list[CommunityInfo]:
        """Communities nearest `vector`, the top level first (falling back a level while fewer
        than `limit / 2` match; every level when there is no hierarchy), in scope."""
        ...

    async def summarize_communities(self, t: Tenant, ids: Sequence[str]) -> tuple[list[CommunityInfo], Usage]:
        """The communities with summaries (written now where none is cached) and the model
        calls that took."""
        ...

    async def community_chunks(
        self, t: Tenant, communities: Sequence[str], vector: list[float], text: str, per_community: int
    ) -> dict[str, list[Chunk]]:
        """The best `per_community` chunks of each community, by vector + text, in scope."""
        ...

    async def links(
        self, t: Tenant, entities: Sequence[str], chunk_ids: Sequence[str], per_entity: int
    ) -> list[Mention]:
        """Chunks mentioning `entities` and the mentions of `chunk_ids` (in scope)."""
        ...

    async def neighbour_relations(
        self, t: Tenant, entities: Sequence[str], vector: list[float], limit: int
    ) -> list[RelationshipRef]:
        """Relations touching `entities` with a source in scope, the `limit` nearest `vector`."""
        ...

    async def labels(self, t: Tenant, iris: Sequence[str]) -> dict[str, str]:
        """Labels of entities and predicates."""
        ...

    async def chunks(self, t: Tenant, ids: Sequence[str]) -> list[Chunk]:
        """Chunks by id (in scope)."""
        ...

    async def complete(
        self, system: str, prompt: str, json_schema: dict[str, Any] | None, max_tokens: int | None = None
    ) -> ModelAnswer:
        """One model call."""
        ...
