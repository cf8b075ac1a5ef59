"""OpenAI-compatible chat completions (OpenAI, vLLM, Ollama, llama.cpp server) with retries."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import openai
from openai import AsyncOpenAI

from processors.text_completion.backend import (
    ChatMessage,
    Completion,
    CompletionChunk,
    CompletionOptions,
    LLMError,
)
from processors.text_completion.json_schema import parse_and_validate

RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}


class OpenAIBackend:
    """Chat completions over HTTP; retries 429/5xx with exponential back-off and jitter."""

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int = 4,
        backoff_s: float = 0.5,
    ) -> None:
        self.model = model
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self._client = AsyncOpenAI(base_url=base_url, api_key=api_key or "none", max_retries=0)

    def _args(self, messages: list[ChatMessage], o: CompletionOptions, stream: bool) -> dict[str, object]:
        args: dict[str, object] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "max_tokens": o.max_tokens,
            "temperature": o.temperature,
            "timeout": o.timeout_s,
            "stream": stream,
        }
        if stream:
            args["stream_options"] = {"include_usage": True}
        if o.json_schema is not None:
            args["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": o.json_schema, "strict": True},
            }
        return args

    async def _with_retries(self, call):  # type: ignore[no-untyped-def]
        for attempt in range(self.max_retries + 1):
            try:
                return await call()
            except openai.APIStatusError as e:
                if e.status_code not in RETRY_STATUS or attempt == self.max_retries:
                    raise LLMError("llm-error", f"model endpoint answered {e.status_code}: {e.message}") from e
            except openai.APITimeoutError as e:
                if attempt == self.max_retries:
                    raise LLMError("timeout", "model endpoint timed out") from e
            except openai.APIConnectionError as e:
                if attempt == self.max_retries:
                    raise LLMError("llm-unavailable", f"cannot reach model endpoint: {e}") from e
            await asyncio.sleep(self.backoff_s * (2**attempt) * (0.5 + random.random() / 2))
        raise AssertionError("unreachable")

    async def complete(self, messages: list[ChatMessage], options: CompletionOptions) -> Completion:
        """One completion (validated against `options.json_schema` when set)."""
        res = await self._with_retries(
            lambda: self._client.chat.completions.create(**self._args(messages, options, False))
        )
        text = res.choices[0].message.content or ""
        if options.json_schema is not None:
            check_json(text, options.json_schema)
        usage = res.usage
        return Completion(
            text=text,
            model=res.model or self.model,
            in_token=usage.prompt_tokens if usage else 0,
            out_token=usage.completion_tokens if usage else 0,
        )

    async def stream(self, messages: list[ChatMessage], options: CompletionOptions) -> AsyncIterator[CompletionChunk]:
        """Pieces as the endpoint sends them; the last chunk is final and carries usage."""
        stream = await self._with_retries(
            lambda: self._client.chat.completions.create(**self._args(messages, options, True))
        )
        in_tok = out_tok = 0
        model = self.model
        async for ev in stream:
            model = ev.model or model
            if ev.usage:
                in_tok, out_tok = ev.usage.prompt_tokens, ev.usage.completion_tokens
            for ch in ev.choices:
                if ch.delta and ch.delta.content:
                    yield CompletionChunk(text=ch.delta.content)
        yield CompletionChunk(text="", final=True, model=model, in_token=in_tok, out_token=out_tok)


def check_json(text: str, schema: dict[str, object]) -> None:
    """Raise LLMError('schema-mismatch') unless `text` is JSON conforming to `schema`."""
    parse_and_validate(text, schema)
