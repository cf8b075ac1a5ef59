"""The HTTP bodies of the gateway's TrustGraph-style, chat and status routes, as the OpenAPI document
describes them (processors/gateway/openapi.py). A service body's own fields are the service's (the
TrustGraph wire format, or a kgflow schema's JSON), so those stay open objects; the envelope is typed.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class ServiceBody(BaseModel):
    """A service request (`POST /api/v1/flow/{flow}/service/{kind}`, `POST /api/v1/{kind}`): the service's
    own fields, plus the workspace it acts in (a bound token may name only its own)."""

    model_config = ConfigDict(extra="allow")

    workspace: str | None = Field(default=None, min_length=1, max_length=256)


class ServiceAnswer(BaseModel):
    """A service's answer: its own fields (TrustGraph's wire format, or the kgflow schema's JSON)."""

    model_config = ConfigDict(extra="allow")


class Health(BaseModel):
    """`GET /api/v1/health`: liveness; with a valid token (or none configured), the running flows."""

    status: Literal["ok"] = "ok"
    flows: list[str] | None = None
    config_version: int | None = None
    auth: bool | None = None


class ChatMessage(BaseModel):
    """One turn of a chat (the question is the last `user` turn)."""

    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[dict[str, Any]]  # a list: OpenAI's content parts (their `text` parts are read)


class StreamOptions(BaseModel):
    """OpenAI's stream options."""

    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    """`POST /v1/chat/completions`: the model name (`kgflow/SERVICE[:MODE][@COLLECTION]`) picks the service."""

    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[ChatMessage]
    stream: bool = False
    stream_options: StreamOptions | None = None


class OllamaChatRequest(BaseModel):
    """`POST /api/chat` (streamed as NDJSON unless `stream` is false)."""

    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[ChatMessage]
    stream: bool = True


class OllamaGenerateRequest(BaseModel):
    """`POST /api/generate` (streamed as NDJSON unless `stream` is false)."""

    model_config = ConfigDict(extra="allow")

    model: str
    prompt: str
    stream: bool = True


class OllamaShowRequest(BaseModel):
    """`POST /api/show`: one model's description."""

    model_config = ConfigDict(extra="allow")

    model: str | None = None
    name: str | None = None  # older clients' name for `model`


class OpenAIErrorDetail(BaseModel):
    """What failed, as OpenAI clients read it."""

    message: str
    type: str
    param: str | None = None
    code: str | None = None


class OpenAIError(BaseModel):
    """An error of the OpenAI-compatible routes."""

    error: OpenAIErrorDetail


class OllamaError(BaseModel):
    """An error as Ollama clients read it."""

    error: str
