"""Embeddings service: texts in, vectors out."""

from __future__ import annotations

from pydantic import Field

from schemas.base import Message, Response


class EmbeddingsRequest(Message):
    """Embed these texts."""

    texts: list[str] = Field(min_length=1, max_length=1024)


class EmbeddingsResponse(Response):
    """One vector per input text, in order."""

    vectors: list[list[float]] = []
