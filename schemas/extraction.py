"""Extractor service: chunk texts in, the concepts each mentions out (no model calls by default)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from schemas.base import Message, Response


class ExtractRequest(Message):
    """Find the concepts of these texts."""

    texts: list[str] = Field(min_length=1, max_length=512)


class ConceptMention(BaseModel):
    """A concept a text mentions: its normalised key, the surface text, the sentence it is in."""

    key: str
    label: str
    sentence: int = 0
    kind: str = "phrase"  # "entity:<TYPE>", "phrase" or "title"
    subject: bool = False  # the grammatical subject of its sentence (what the sentence is about)
    aliases: list[str] = Field(default=[], max_length=64)  # other keys of the same concept ("neil peart")


class ExtractResponse(Response):
    """One list of mentions per input text, in order, and what extracted them."""

    mentions: list[list[ConceptMention]] = []
    extractor: str = ""
