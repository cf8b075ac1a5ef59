"""The Embedder protocol over a flow's `embeddings` service."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from processors.base.client import RequestResponseClient
from schemas.embeddings import EmbeddingsRequest


class FlowEmbedder:
    """Embeds through the bus, in requests of at most `batch` texts (loads embed as queries do)."""

    model = "flow-embeddings"

    def __init__(self, client: RequestResponseClient[Any], batch: int = 256) -> None:
        self._client = client
        self._batch = batch

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        out: list[list[float]] = []
        for i in range(0, len(texts), self._batch):
            res = await self._client.request(EmbeddingsRequest(texts=list(texts[i : i + self._batch])))
            out.extend(res.vectors)
        return out
