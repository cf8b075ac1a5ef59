"""OpenAI-compatible chat completions (OpenAI, vLLM, Ollama, llama.cpp server) with retries.

Retries: 408/409/429/5xx answers are retried with exponential back-off and
jitter (a `Retry-After` header, when sent, sets the wait), up to `max_retries`
times and never past the call's `timeout_s`. Other 4xx answers are not retried.
An endpoint that does not answer at all (connection refused or dropped, or no
connection within CONNECT_TIMEOUT_S) is tried once more, then marked down for
DOWN_S seconds: calls in that time fail at once with ``llm-unavailable``
instead of each waiting through its own retries (a dead endpoint used to stall
a lazy-rag question ~29 s). Errors surface as `LLMError` with a wire type:
``rate-limited`` (still 429 after the retries), ``llm-unavailable`` (5xx or no
connection after the retries), ``timeout``, ``llm-error`` (the endpoint
rejected the request, e.g. 400/401/404) and ``schema-mismatch`` (structured
output that does not conform to the request's schema).

Structured output has two dialects, chosen by `json_mode`:

- ``json_schema``: OpenAI's ``response_format={"type": "json_schema", ...}``
  (OpenAI, vLLM, Ollama); an endpoint rejecting it is an ``llm-error`` at
  once (resending the same body cannot help), naming ``llm-json-mode``;
- ``json_object``: ``{"type": "json_object", "schema": ...}``, the form
  llama.cpp's server understands (it answers HTTP 500 to ``json_schema``);
- ``auto`` (default): send ``json_schema``; if the endpoint rejects it
  (400/422/500 whose error text names ``response_format`` or ``json_schema``),
  resend at once as ``json_object`` and keep that dialect for this backend.

Whatever the dialect, the text is validated against the schema here.

Usage of streamed completions: the stream is asked for usage
(``stream_options.include_usage``); when the endpoint sends it (OpenAI, vLLM),
it is used as is (``extra["usage"] == "reported"``). llama.cpp's server sends
none, so then ``out_token`` is the number of content deltas (such servers send
one token per delta) and ``in_token`` comes from a one-token non-streamed probe
of the same prompt, whose ``usage.prompt_tokens`` is exact
(``extra["usage"] == "counted"``; ``"partial"`` if the probe failed and
``in_token`` is 0).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Literal, TypeVar

import httpx
import openai
from openai import AsyncOpenAI
from openai.types import CompletionUsage

from processors.models.text_completion.backend import (
    ChatMessage,
    Completion,
    CompletionChunk,
    CompletionOptions,
    LLMError,
)
from processors.models.text_completion.json_schema import parse_and_validate

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
CONNECT_RETRIES = 1  # a connection that fails is tried once more (a restarting server), then given up
CONNECT_TIMEOUT_S = 5.0  # a host that never accepts is down, not slow
DOWN_S = 15.0  # after an endpoint could not be reached, calls fail at once for this long
JsonMode = Literal["auto", "json_schema", "json_object"]
T = TypeVar("T")


def _rejects_json_schema(exc: openai.APIStatusError) -> bool:
    """Tell whether an error answer says the endpoint does not understand `json_schema`."""
    if exc.status_code not in (400, 422, 500):
        return False
    text = f"{exc.message} {exc.body}".lower()
    return "json_schema" in text or "response_format" in text


def _retry_after(exc: openai.APIStatusError) -> float | None:
    """The `Retry-After` header in seconds, if the answer carries a numeric one."""
    try:
        value = exc.response.headers.get("retry-after")
        return float(value) if value is not None else None
    except (ValueError, AttributeError):
        return None


class OpenAIBackend:
    """An `LLMBackend` over an OpenAI-compatible chat-completions endpoint."""

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        max_retries: int = 4,
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        json_mode: JsonMode = "auto",
    ) -> None:
        """Configure the endpoint (no request is made until the first completion).

        `base_url` defaults to OpenAI's; `api_key` may be omitted for local servers.
        """
        self.model = model
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.json_mode: JsonMode = json_mode
        self._client = AsyncOpenAI(base_url=base_url, api_key=api_key or "none", max_retries=0)
        self._down_until = 0.0  # loop time until which the endpoint counts as unreachable
        self._down_reason = ""

    async def close(self) -> None:
        """Close the HTTP connection pool."""
        await self._client.close()

    # --- requests ------------------------------------------------------------------
    def _args(self, messages: list[ChatMessage], o: CompletionOptions, stream: bool) -> dict[str, Any]:
        """Keyword arguments of `chat.completions.create` for this call."""
        args: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "max_tokens": o.max_tokens,
            "temperature": o.temperature,
            "timeout": httpx.Timeout(o.timeout_s, connect=min(CONNECT_TIMEOUT_S, o.timeout_s)),
            "stream": stream,
        }
        if stream:
            args["stream_options"] = {"include_usage": True}
        if o.json_schema is not None:
            if self.json_mode == "json_object":
                args["response_format"] = {"type": "json_object", "schema": o.json_schema}
            else:
                args["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": "response", "schema": o.json_schema},
                }
        return args

    async def _call(self, make: Callable[[], Awaitable[T]], options: CompletionOptions) -> T:
        """Run `make()` with retries, back-off, the json_schema fallback and error mapping."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + options.timeout_s
        attempt = connects = 0
        while True:
            if loop.time() < self._down_until:
                left = self._down_until - loop.time()
                raise LLMError(
                    "llm-unavailable",
                    f"the model endpoint {self._client.base_url} is unreachable ({self._down_reason}); "
                    f"not tried again for {left:.0f} s",
                )
            try:
                return await make()
            except openai.APIStatusError as exc:
                status = exc.status_code
                if options.json_schema is not None and self.json_mode != "json_object" and _rejects_json_schema(exc):
                    if self.json_mode == "auto":
                        self.json_mode = "json_object"  # this endpoint speaks llama.cpp's dialect
                        continue
                    raise LLMError(  # retrying the same body cannot help
                        "llm-error",
                        f"model endpoint rejects response_format json_schema ({status}: {exc.message}); "
                        "set llm-json-mode=json_object or auto",
                    ) from exc
                if status not in RETRY_STATUS:
                    raise LLMError("llm-error", f"model endpoint answered {status}: {exc.message}") from exc
                kind = "rate-limited" if status == 429 else "llm-unavailable"
                failure = LLMError(kind, f"model endpoint answered {status} after {attempt + 1} attempts")
                wait = _retry_after(exc)
            except openai.APIConnectionError as exc:  # APITimeoutError too: it is a subclass
                if isinstance(exc, openai.APITimeoutError) and not isinstance(exc.__cause__, httpx.ConnectTimeout):
                    raise LLMError("timeout", f"{self.model}: no answer within {options.timeout_s}s") from exc
                reason = f"{type(exc.__cause__ or exc).__name__}: {exc.__cause__ or exc}"
                if connects >= CONNECT_RETRIES or loop.time() + self.backoff_s >= deadline:
                    self._down_until, self._down_reason = loop.time() + DOWN_S, reason
                    raise LLMError("llm-unavailable", f"cannot reach the model endpoint ({reason})") from exc
                connects += 1
                await asyncio.sleep(self.backoff_s)
                continue
            if wait is None:
                wait = self.backoff_s * (2**attempt) * (0.5 + random.random() / 2)
            wait = min(wait, self.max_backoff_s)
            if attempt >= self.max_retries or loop.time() + wait >= deadline:
                raise failure
            attempt += 1
            await asyncio.sleep(wait)

    # --- the LLMBackend protocol -----------------------------------------------------
    async def complete(self, messages: list[ChatMessage], options: CompletionOptions) -> Completion:
        """One completion (validated against `options.json_schema` when set)."""
        res = await self._call(
            lambda: self._client.chat.completions.create(**self._args(messages, options, False)), options
        )
        if not res.choices:
            raise LLMError("llm-error", "model endpoint answered with no choices")
        text = res.choices[0].message.content or ""
        if options.json_schema is not None:
            parse_and_validate(text, options.json_schema)
        usage = res.usage
        return Completion(
            text=text,
            model=res.model or self.model,
            in_token=usage.prompt_tokens if usage else 0,
            out_token=usage.completion_tokens if usage else 0,
        )

    async def stream(self, messages: list[ChatMessage], options: CompletionOptions) -> AsyncIterator[CompletionChunk]:
        """Pieces as the endpoint sends them; the last chunk is final and carries usage.

        Retries happen only before the first piece; a failure mid-stream is an `LLMError`.
        """
        stream = await self._call(
            lambda: self._client.chat.completions.create(**self._args(messages, options, True)), options
        )
        model = self.model
        usage: CompletionUsage | None = None
        deltas = 0
        pieces: list[str] = []
        finish_reason = None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + options.timeout_s
        events = stream.__aiter__()
        try:
            while True:
                try:
                    event = await asyncio.wait_for(events.__anext__(), max(deadline - loop.time(), 0.001))
                except StopAsyncIteration:
                    break
                model = event.model or model
                if event.usage:
                    usage = event.usage
                for choice in event.choices:
                    finish_reason = choice.finish_reason or finish_reason
                    if choice.delta and choice.delta.content:
                        deltas += 1
                        pieces.append(choice.delta.content)
                        yield CompletionChunk(text=choice.delta.content, model=model)
        except TimeoutError as exc:
            raise LLMError("timeout", f"{self.model}: stream exceeded {options.timeout_s}s") from exc
        except Exception as exc:  # the SDK's or the HTTP library's errors mid-stream
            raise LLMError("llm-error", f"model stream failed: {type(exc).__name__}: {exc}") from exc
        finally:
            await stream.close()
        if options.json_schema is not None:
            parse_and_validate("".join(pieces), options.json_schema)
        extra: dict[str, Any] = {"finish_reason": finish_reason}
        if usage is not None:
            in_token, out_token = usage.prompt_tokens, usage.completion_tokens
            extra["usage"] = "reported"
        else:
            out_token = deltas
            in_token = await self._prompt_tokens(messages, options)
            extra["usage"] = "counted" if in_token else "partial"
        yield CompletionChunk(text="", final=True, model=model, in_token=in_token, out_token=out_token, extra=extra)

    async def _prompt_tokens(self, messages: list[ChatMessage], options: CompletionOptions) -> int:
        """The prompt's token count from a one-token non-streamed probe (0 if it fails)."""
        probe = CompletionOptions(max_tokens=1, temperature=0.0, timeout_s=options.timeout_s)
        try:
            res = await self._client.chat.completions.create(**self._args(messages, probe, False))
        except openai.APIError:
            return 0
        return res.usage.prompt_tokens if res.usage else 0
