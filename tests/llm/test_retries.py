"""Retry and back-off of the `openai` backend against a small REAL aiohttp server on loopback.

The server answers from a script (status per request) and records every request
it receives, so the tests count attempts server-side. No HTTP mocking library.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest
from aiohttp import web
from llm_support import free_port

from processors.models.text_completion.backend import ChatMessage, CompletionOptions, LLMError
from processors.models.text_completion.openai_backend import OpenAIBackend

QUESTION = [ChatMessage("user", "hi")]
SCHEMA: dict[str, Any] = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
LLAMA_CPP_REJECTION = {
    "error": {
        "message": "1 validation error: ('body', 'response_format', 'type') Input should be 'text' or 'json_object'",
        "type": "internal_server_error",
    }
}


def completion_body(text: str, model: str = "scripted-model") -> dict[str, Any]:
    """A valid non-streamed chat completion."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
    }


def stream_events(pieces: list[str], model: str = "scripted-model") -> list[dict[str, Any]]:
    """SSE payloads of a streamed completion whose last event carries usage (as OpenAI sends it)."""
    base = {"id": "chatcmpl-2", "object": "chat.completion.chunk", "created": 1, "model": model}
    events = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}]
    events += [{**base, "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]} for p in pieces]
    events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    events.append({**base, "choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}})
    return events


@dataclass
class Scripted:
    """A chat-completions endpoint that answers `statuses` in order (the last repeats)."""

    statuses: list[int]
    headers: dict[str, str] = field(default_factory=dict)
    text: str = "hello"
    delay_s: float = 0.0
    reject_json_schema: bool = False
    requests: list[dict[str, Any]] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    base_url: str = ""
    backends: ClassVar[list[OpenAIBackend]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Answer one POST /v1/chat/completions from the script."""
        body = await request.json()
        self.requests.append(body)
        self.times.append(time.monotonic())
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        fmt = body.get("response_format") or {}
        if self.reject_json_schema and fmt.get("type") == "json_schema":
            return web.json_response(LLAMA_CPP_REJECTION, status=500)
        status = self.statuses[min(len(self.requests) - 1, len(self.statuses) - 1)]
        if status != 200:
            error = {"error": {"message": f"scripted {status}", "type": "scripted"}}
            return web.json_response(error, status=status, headers=self.headers)
        if not body.get("stream"):
            return web.json_response(completion_body(self.text))
        res = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await res.prepare(request)
        for event in stream_events(list(self.text)):
            await res.write(f"data: {json.dumps(event)}\n\n".encode())
        await res.write(b"data: [DONE]\n\n")
        await res.write_eof()
        return res


@pytest.fixture
async def endpoint() -> AsyncIterator[Any]:
    """Start a scripted endpoint: `await endpoint(Scripted(...))` returns it with `base_url` set."""
    runners: list[web.AppRunner] = []
    Scripted.backends = []

    async def start(script: Scripted) -> Scripted:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", script.handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        host, port = runner.addresses[0][:2]
        script.base_url = f"http://{host}:{port}/v1"
        return script

    yield start
    for backend in Scripted.backends:
        await backend.close()
    for runner in runners:
        await runner.cleanup()


def backend_for(script: Scripted, **kw: Any) -> OpenAIBackend:
    """A backend with fast back-off aimed at `script`."""
    kw.setdefault("backoff_s", 0.01)
    backend = OpenAIBackend("scripted-model", script.base_url, "test-key", **kw)
    Scripted.backends.append(backend)  # closed by the `endpoint` fixture
    return backend


async def test_429_then_503_then_200_is_retried_and_succeeds(endpoint: Any) -> None:
    script = await endpoint(Scripted([429, 503, 200]))
    result = await backend_for(script, max_retries=4).complete(QUESTION, CompletionOptions())
    assert result.text == "hello"
    assert (result.model, result.in_token, result.out_token) == ("scripted-model", 7, 3)
    assert len(script.requests) == 3


async def test_retry_after_header_sets_the_wait(endpoint: Any) -> None:
    script = await endpoint(Scripted([429, 200], headers={"Retry-After": "0.4"}))
    result = await backend_for(script).complete(QUESTION, CompletionOptions())
    assert result.text == "hello"
    assert len(script.requests) == 2
    assert script.times[1] - script.times[0] >= 0.35  # waited as told, not the 10 ms back-off


@pytest.mark.parametrize(("status", "kind"), [(429, "rate-limited"), (503, "llm-unavailable")])
async def test_gives_up_after_max_retries_with_a_typed_error(endpoint: Any, status: int, kind: str) -> None:
    script = await endpoint(Scripted([status]))
    with pytest.raises(LLMError) as info:
        await backend_for(script, max_retries=2).complete(QUESTION, CompletionOptions())
    assert info.value.type == kind
    assert str(status) in info.value.message
    assert len(script.requests) == 3  # the first attempt and two retries


async def test_400_is_not_retried(endpoint: Any) -> None:
    script = await endpoint(Scripted([400, 200]))
    with pytest.raises(LLMError) as info:
        await backend_for(script, max_retries=4).complete(QUESTION, CompletionOptions())
    assert info.value.type == "llm-error"
    assert "400" in info.value.message
    assert len(script.requests) == 1


async def test_stream_is_retried_before_the_first_piece_and_uses_reported_usage(endpoint: Any) -> None:
    script = await endpoint(Scripted([503, 200], text="abc"))
    chunks = [c async for c in backend_for(script).stream(QUESTION, CompletionOptions())]
    assert [c.text for c in chunks[:-1]] == ["a", "b", "c"]
    final = chunks[-1]
    assert final.final
    assert (final.in_token, final.out_token, final.extra["usage"]) == (11, 5, "reported")
    assert len(script.requests) == 2
    assert script.requests[-1]["stream_options"] == {"include_usage": True}


async def test_auto_json_mode_falls_back_to_json_object_once(endpoint: Any) -> None:
    script = await endpoint(Scripted([200], text='{"answer": "x"}', reject_json_schema=True))
    backend = backend_for(script)
    options = CompletionOptions(json_schema=SCHEMA)
    assert (await backend.complete(QUESTION, options)).text == '{"answer": "x"}'
    assert [r["response_format"]["type"] for r in script.requests] == ["json_schema", "json_object"]
    assert script.requests[1]["response_format"]["schema"] == SCHEMA
    await backend.complete(QUESTION, options)  # remembered: no second rejection
    assert [r["response_format"]["type"] for r in script.requests][2:] == ["json_object"]


async def test_strict_json_schema_mode_is_not_retried_on_rejection(endpoint: Any) -> None:
    script = await endpoint(Scripted([200], reject_json_schema=True))
    with pytest.raises(LLMError) as info:
        await backend_for(script, json_mode="json_schema").complete(QUESTION, CompletionOptions(json_schema=SCHEMA))
    assert info.value.type == "llm-error"
    assert len(script.requests) == 1


async def test_non_conforming_structured_output_is_a_schema_mismatch(endpoint: Any) -> None:
    script = await endpoint(Scripted([200], text='{"answer": 42}'))
    with pytest.raises(LLMError) as info:
        await backend_for(script).complete(QUESTION, CompletionOptions(json_schema=SCHEMA))
    assert info.value.type == "schema-mismatch"
    assert "$.answer" in info.value.message


async def test_slow_endpoint_is_a_timeout(endpoint: Any) -> None:
    script = await endpoint(Scripted([200], delay_s=2.0))
    with pytest.raises(LLMError) as info:
        await backend_for(script).complete(QUESTION, CompletionOptions(timeout_s=0.3))
    assert info.value.type == "timeout"
    assert len(script.requests) == 1


async def test_unreachable_endpoint_is_unavailable_after_retries() -> None:
    backend = OpenAIBackend("m", f"http://127.0.0.1:{free_port()}/v1", backoff_s=0.01, max_retries=2)
    try:
        with pytest.raises(LLMError) as info:
            await backend.complete(QUESTION, CompletionOptions(timeout_s=10))
        assert info.value.type == "llm-unavailable"
    finally:
        await backend.close()
