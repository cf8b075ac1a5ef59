"""The Embedder protocol over a flow's `embeddings` service."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from processors.base.client import RequestResponseClient
from schemas.embeddings import EmbeddingsRequest


class FlowEmbedder:
    """Embeds through the bus (loads embed as queries do), in requests of at most `batch` texts and
    `chars` characters, within the service's default token budget (8192 tokens): a text of n
    characters costs at most n + 2 tokens. `model` is the flow's embedding model once it answered."""

    def __init__(self, client: RequestResponseClient[Any], batch: int = 128, chars: int = 6144) -> None:
        self._client = client
        self._batch = batch
        self._chars = chars
        self.model = ""

    async def embed(self, texts: Sequence[str], max_tokens: int | None = None) -> list[list[float]]:
        """One vector per text, in order (the service applies its own budget)."""
        out: list[list[float]] = []
        for part in self._parts(texts):
            res = await self._client.request(EmbeddingsRequest(texts=part))
            out.extend(res.vectors)
            self.model = res.model
        return out

    def _parts(self, texts: Sequence[str]) -> list[list[str]]:
        parts: list[list[str]] = [[]]
        size = 0
        for t in texts:
            if parts[-1] and (len(parts[-1]) >= self._batch or size + len(t) > self._chars):
                parts.append([])
                size = 0
            parts[-1].append(t)
            size += len(t)
        return [p for p in parts if p]
