"""The Embedder protocol over a flow's `embeddings` service."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from processors.base.client import RequestResponseClient
from schemas.embeddings import EmbeddingsRequest

REQUEST_TEXTS = 128
REQUEST_CHARS = 6144  # a text of n characters costs at most n + 2 tokens: within 8192 tokens
# Short texts (concept labels) in requests of up to this many: the model groups a request's texts
# by length into calls, and a bigger request of similar lengths makes fewer, fuller calls (3,842
# HotpotQA labels: 9% less CPU than requests of 128, of which sorting alone 1.4%).
BULK_REQUEST_TEXTS = 512


class FlowEmbedder:
    """Embeds through the bus (loads embed as queries do), in requests of at most `batch` texts and
    `chars` characters, within the service's default token budget (8192 tokens): a text of n
    characters costs at most n + 2 tokens; `in_flight` requests at once (the service's bulk work
    runs two at a time: both cores). Texts are requested shortest first, so each request holds
    texts of about one length (less padding, fewer model calls). `model` is the flow's embedding
    model once it answered."""

    def __init__(
        self,
        client: RequestResponseClient[Any],
        batch: int = REQUEST_TEXTS,
        chars: int = REQUEST_CHARS,
        in_flight: int = 2,
    ) -> None:
        self._client = client
        self._batch = batch
        self._chars = chars
        self._slots = asyncio.Semaphore(in_flight)
        self.model = ""

    async def embed(
        self, texts: Sequence[str], max_tokens: int | None = None, query: bool = False
    ) -> list[list[float]]:
        """One vector per text, in order (the service applies its own budget)."""

        async def one(part: list[str]) -> list[list[float]]:
            async with self._slots:
                res = await self._client.request(EmbeddingsRequest(texts=part, query=query))
            self.model = res.model
            return res.vectors

        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        parts = request_parts([texts[i] for i in order], self._batch, self._chars)
        tasks = [asyncio.ensure_future(one(part)) for part in parts]
        try:
            done = await asyncio.gather(*tasks)
        except BaseException:  # the first failure (as raised) ends the others
            for task in tasks:
                task.cancel()
            raise
        vectors: list[list[float]] = [[] for _ in texts]
        for i, v in zip(order, (v for part in done for v in part), strict=True):
            vectors[i] = v
        return vectors


def request_parts(texts: Sequence[str], batch: int = REQUEST_TEXTS, chars: int = REQUEST_CHARS) -> list[list[str]]:
    """`texts` in order, in embeddings requests of at most `batch` texts and `chars` characters
    (a longer text alone): each within the service's default limits however many texts there are."""
    parts: list[list[str]] = [[]]
    size = 0
    for t in texts:
        if parts[-1] and (len(parts[-1]) >= batch or size + len(t) > chars):
            parts.append([])
            size = 0
        parts[-1].append(t)
        size += len(t)
    return [p for p in parts if p]
