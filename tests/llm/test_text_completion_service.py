"""The text-completion processor over the memory bus: backend selection, usage, structured output, streaming.

The `local` and `openai` flows run the real SmolLM2 model (in-process, and behind
llama.cpp's OpenAI-compatible server).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest
from llm_support import LlamaServer
from prometheus_client import REGISTRY

from processors.base.bus import MemoryBus
from processors.base.client import RemoteError, RequestResponseClient
from processors.models.text_completion.json_schema import schema_errors
from processors.models.text_completion.service import (
    ENVIRONMENT,
    NOT_CONFIGURED,
    LLMParams,
    TextCompletionProcessor,
)
from schemas.text_completion import TextCompletionRequest, TextCompletionResponse
from schemas.topics import topic

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
QUESTION = "What is the capital of France?"
Served = Callable[[dict[str, Any]], AbstractAsyncContextManager[RequestResponseClient[TextCompletionResponse]]]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No KGFLOW_LLM* / OPENAI_API_KEY from the caller's shell leaks into a test."""
    for variables in ENVIRONMENT.values():
        for name in variables:
            monkeypatch.delenv(name, raising=False)


@pytest.fixture
def served() -> Served:
    """`async with served(params) as client`: a text-completion processor serving a fresh flow."""

    @asynccontextmanager
    async def serve(params: dict[str, Any]) -> AsyncIterator[RequestResponseClient[TextCompletionResponse]]:
        bus = MemoryBus()
        proc = TextCompletionProcessor(bus)
        flow_id = f"tc-{uuid.uuid4().hex[:8]}"
        await proc.start_flow(flow_id, params)
        client = RequestResponseClient(
            bus,
            topic("text-completion", flow_id),
            topic("text-completion", flow_id, "response"),
            TextCompletionResponse,
            timeout_s=120,
        )
        try:
            yield client
        finally:
            await client.stop()
            await proc.stop()
            await bus.close()

    return serve


def tokens(model: str, direction: str) -> float:
    """The Prometheus token counter's current value."""
    return REGISTRY.get_sample_value("kgflow_llm_tokens_total", {"model": model, "direction": direction}) or 0.0


# -- selection (pure) ----------------------------------------------------------------


def test_flow_parameters_win_over_the_environment_which_fills_the_rest() -> None:
    env = {
        "KGFLOW_LLM": "local",
        "KGFLOW_LLM_MODEL": "env-model",
        "OPENAI_API_KEY": "sk-env",
        "KGFLOW_LLM_TEMPERATURE": "0.7",
        "KGFLOW_LLM_TIMEOUT": "9",
    }
    p = LLMParams.resolve({"llm": "openai", "llm-base-url": "http://127.0.0.1:1/v1", "max-tokens": 33}, env)
    assert (p.llm, p.llm_model, p.llm_base_url, p.llm_api_key) == (
        "openai",
        "env-model",
        "http://127.0.0.1:1/v1",
        "sk-env",
    )
    assert (p.temperature, p.max_tokens, p.llm_timeout, p.llm_json_mode) == (0.7, 33, 9.0, "auto")
    assert LLMParams.resolve({}, {}).llm == "none"
    assert "sk-env" not in p.describe()


# -- none and misconfiguration -------------------------------------------------------


async def test_none_answers_not_configured(served: Served) -> None:
    async with served({"llm": "none"}) as client:
        res = await client.request(TextCompletionRequest(prompt=QUESTION))
        assert res.configured is False
        assert res.response == NOT_CONFIGURED
        assert (res.model, res.in_token, res.out_token) == ("none", 0, 0)
        streamed = [r async for r in client.stream(TextCompletionRequest(prompt=QUESTION, streaming=True))]
        assert len(streamed) == 1 and streamed[0].configured is False and streamed[0].end_of_stream


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"llm": "openai"}, "llm-model"),
        ({"llm": "local", "llm-model": "/nonexistent/model.gguf"}, "not a file"),
        ({"llm": "gpt"}, "invalid flow parameter llm='gpt'"),
    ],
)
async def test_misconfigured_backend_is_a_typed_error_and_the_flow_keeps_serving(
    served: Served, params: dict[str, Any], needle: str
) -> None:
    async with served(params) as client:
        for _ in range(2):
            with pytest.raises(RemoteError) as info:
                await client.request(TextCompletionRequest(prompt=QUESTION))
            assert info.value.type == "llm-config"
            assert needle in info.value.message


# -- the local model -----------------------------------------------------------------


async def test_local_completion_carries_usage_and_counts_tokens(served: Served, gguf_path: str) -> None:
    async with served({"llm": "local"}) as client:
        res = await client.request(TextCompletionRequest(prompt=QUESTION, max_tokens=16))
        assert res.configured and res.response.strip()
        assert res.model and res.in_token and res.out_token
        assert 0 < res.out_token <= 17
        before_in, before_out = tokens(res.model, "in"), tokens(res.model, "out")
        again = await client.request(TextCompletionRequest(prompt=QUESTION, max_tokens=16))
        assert tokens(res.model, "in") - before_in == again.in_token
        assert tokens(res.model, "out") - before_out == again.out_token


async def test_local_streaming_sends_pieces_then_usage(served: Served, gguf_path: str) -> None:
    async with served({"llm": "local", "max-tokens": 16}) as client:
        streamed = [r async for r in client.stream(TextCompletionRequest(prompt=QUESTION, streaming=True))]
        pieces, final = streamed[:-1], streamed[-1]
        assert len(pieces) >= 3
        assert all(not p.end_of_stream and p.response and p.model == final.model for p in pieces)
        assert final.end_of_stream and final.model and final.in_token and final.out_token
        whole = await client.request(TextCompletionRequest(prompt=QUESTION))
        assert "".join(p.response for p in pieces) + final.response == whole.response


async def test_local_structured_output_conforms(served: Served, gguf_path: str) -> None:
    async with served({"llm": "local"}) as client:
        req = TextCompletionRequest(system="Answer in JSON.", prompt=QUESTION, json_schema=SCHEMA, max_tokens=48)
        value = json.loads((await client.request(req)).response)
        assert schema_errors(value, SCHEMA) == []


async def test_non_conforming_output_is_a_schema_mismatch_error(served: Served, gguf_path: str) -> None:
    async with served({"llm": "local"}) as client:
        req = TextCompletionRequest(prompt=QUESTION, json_schema=SCHEMA, max_tokens=3)  # cannot close the object
        with pytest.raises(RemoteError) as info:
            await client.request(req)
        assert info.value.type == "schema-mismatch"
        with pytest.raises(RemoteError) as info:
            _ = [r async for r in client.stream(req.model_copy(update={"streaming": True}))]
        assert info.value.type == "schema-mismatch"


# -- the openai backend against llama.cpp's server -----------------------------------


async def test_openai_flow_against_llama_cpp_server(served: Served, llama_server: LlamaServer) -> None:
    params = {"llm": "openai", "llm-model": llama_server.model, "llm-base-url": llama_server.base_url}
    async with served(params) as client:
        res = await client.request(TextCompletionRequest(prompt=QUESTION, max_tokens=12))
        assert res.response.strip()
        assert (res.model, res.end_of_stream) == (llama_server.model, True)
        assert res.in_token and 0 < (res.out_token or 0) <= 12

        streamed = [
            r async for r in client.stream(TextCompletionRequest(prompt=QUESTION, max_tokens=12, streaming=True))
        ]
        assert len(streamed) >= 3
        assert streamed[-1].end_of_stream and streamed[-1].in_token == res.in_token
        assert "".join(r.response for r in streamed) == res.response

        req = TextCompletionRequest(system="Answer in JSON.", prompt=QUESTION, json_schema=SCHEMA, max_tokens=48)
        assert schema_errors(json.loads((await client.request(req)).response), SCHEMA) == []


async def test_openai_flow_with_unreachable_endpoint_is_unavailable(served: Served) -> None:
    from llm_support import free_port

    params = {"llm": "openai", "llm-model": "m", "llm-base-url": f"http://127.0.0.1:{free_port()}/v1"}
    async with served({**params, "llm-max-retries": 1}) as client:
        with pytest.raises(RemoteError) as info:
            await client.request(TextCompletionRequest(prompt=QUESTION))
        assert info.value.type == "llm-unavailable"
