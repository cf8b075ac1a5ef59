"""The Embedder protocol over a flow's `embeddings` service."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from processors.base.client import RequestResponseClient
from schemas.embeddings import EmbeddingsRequest


class FlowEmbedder:
    """Embeds through the bus (loads embed as queries do), in requests of at most `batch` texts and
    `chars` characters, within the service's default token budget (8192 tokens): a text of n
    characters costs at most n + 2 tokens; `in_flight` requests at once (the service's bulk work
    runs two at a time: both cores). `model` is the flow's embedding model once it answered."""

    def __init__(
        self, client: RequestResponseClient[Any], batch: int = 128, chars: int = 6144, in_flight: int = 2
    ) -> None:
        self._client = client
        self._batch = batch
        self._chars = chars
        self._slots = asyncio.Semaphore(in_flight)
        self.model = ""

    async def embed(self, texts: Sequence[str], max_tokens: int | None = None) -> list[list[float]]:
        """One vector per text, in order (the service applies its own budget)."""

        async def one(part: list[str]) -> list[list[float]]:
            async with self._slots:
                res = await self._client.request(EmbeddingsRequest(texts=part))
            self.model = res.model
            return res.vectors

        tasks = [asyncio.ensure_future(one(part)) for part in self._parts(texts)]
        try:
            done = await asyncio.gather(*tasks)
        except BaseException:  # the first failure (as raised) ends the others
            for task in tasks:
                task.cancel()
            raise
        return [v for part in done for v in part]

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
