"""Text completion: a system prompt and a user prompt in, text out."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from schemas.base import Message, Response


class TextCompletionRequest(Message):
    """Complete `prompt` under `system`; optional JSON schema constrains the output."""

    system: str = Field(default="", max_length=200_000)
    prompt: str = Field(min_length=1, max_length=200_000)
    streaming: bool = False
    json_schema: dict[str, Any] | None = None
    max_tokens: int | None = Field(default=None, ge=1, le=32768)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)


class TextCompletionResponse(Response):
    """The completion (or one streamed piece of it) with usage accounting."""

    response: str = ""
    model: str | None = None
    in_token: int | None = None
    out_token: int | None = None
    configured: bool = True
