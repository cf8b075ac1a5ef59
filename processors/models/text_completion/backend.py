"""The contract every language-model backend of text-completion implements."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class ChatMessage:
    """One chat message (`role` is system, user or assistant)."""

    role: str
    content: str


@dataclass
class CompletionOptions:
    """Per-call generation options; these defaults are also the flow parameters' (`LLMParams`)."""

    max_tokens: int = 512
    temperature: float = 0.0
    json_schema: dict[str, Any] | None = None  # constrain the output to this schema
    timeout_s: float = 120.0


@dataclass
class Completion:
    """A finished completion with usage accounting."""

    text: str
    model: str = ""
    in_token: int = 0
    out_token: int = 0


@dataclass
class CompletionChunk:
    """One streamed piece; the last one has `final=True` and carries usage."""

    text: str
    final: bool = False
    model: str = ""
    in_token: int = 0
    out_token: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


class LLMBackend(Protocol):
    """A language model: async all the way down, never blocking the event loop."""

    model: str

    async def complete(self, messages: list[ChatMessage], options: CompletionOptions) -> Completion:
        """Return the whole completion."""
        ...

    def stream(self, messages: list[ChatMessage], options: CompletionOptions) -> AsyncIterator[CompletionChunk]:
        """Yield pieces of the completion as they are generated; the last is final."""
        ...


class LLMError(Exception):
    """A backend failure with a wire error type (e.g. `llm-error`, `timeout`, `schema-mismatch`)."""

    def __init__(self, type_: str, message: str) -> None:
        super().__init__(message)
        self.type = type_
        self.message = message
