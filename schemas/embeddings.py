"""Embeddings service: texts in, vectors out."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from schemas.base import Message, Response

MAX_TEXT_CHARS = 65536  # per text (the service's token budget bounds a whole request)


class EmbeddingsRequest(Message):
    """Embed these texts."""

    texts: list[Annotated[str, Field(max_length=MAX_TEXT_CHARS)]] = Field(min_length=1, max_length=1024)
    query: bool = False  # the texts are questions, not passages (an asymmetric model embeds them apart)


class EmbeddingsResponse(Response):
    """One vector per input text, in order, and the model that made them."""

    vectors: list[list[float]] = []
    model: str = ""
