"""The `openai` backend against a REAL OpenAI-compatible endpoint: llama-cpp-python's server running SmolLM2."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from llm_support import LlamaServer

from processors.models.text_completion.backend import ChatMessage, CompletionChunk, CompletionOptions, LLMError
from processors.models.text_completion.json_schema import schema_errors
from processors.models.text_completion.openai_backend import OpenAIBackend

QUESTION = [ChatMessage("user", "What is the capital of France?")]
JSON_QUESTION = [
    ChatMessage("system", "Answer in JSON."),
    ChatMessage("user", "What is the capital of France? Reply with a short answer."),
]
ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}


@pytest.fixture
async def backend(llama_server: LlamaServer) -> AsyncIterator[OpenAIBackend]:
    """A fresh backend (json_mode auto) per test: its HTTP client belongs to the test's loop."""
    b = OpenAIBackend(llama_server.model, llama_server.base_url, backoff_s=0.05)
    yield b
    await b.close()


async def _collect(backend: OpenAIBackend, messages: list[ChatMessage], o: CompletionOptions) -> list[CompletionChunk]:
    return [chunk async for chunk in backend.stream(messages, o)]


async def test_complete_returns_text_usage_and_model(backend: OpenAIBackend, llama_server: LlamaServer) -> None:
    result = await backend.complete(QUESTION, CompletionOptions(max_tokens=24))
    assert result.text.strip()
    assert result.model == llama_server.model
    assert result.in_token > 0
    assert 0 < result.out_token <= 24


async def test_stream_yields_pieces_then_final_chunk_with_counted_usage(backend: OpenAIBackend) -> None:
    chunks = await _collect(backend, QUESTION, CompletionOptions(max_tokens=24))
    pieces, final = chunks[:-1], chunks[-1]
    assert len(pieces) >= 3
    assert not any(c.final for c in pieces)
    assert final.final and final.text == ""
    # llama.cpp's server streams no usage: out_token counts the deltas, in_token comes from the probe.
    assert final.extra["usage"] == "counted"
    assert final.out_token == len(pieces)
    # Greedy decoding: the stream is the same completion as the non-streamed one, token for token.
    whole = await backend.complete(QUESTION, CompletionOptions(max_tokens=24))
    assert "".join(c.text for c in pieces) == whole.text
    assert final.in_token == whole.in_token
    assert final.out_token == whole.out_token


async def test_structured_output_falls_back_to_llama_cpp_dialect_and_conforms(backend: OpenAIBackend) -> None:
    assert backend.json_mode == "auto"
    options = CompletionOptions(max_tokens=48, json_schema=ANSWER_SCHEMA)
    result = await backend.complete(JSON_QUESTION, options)
    value = json.loads(result.text)
    assert schema_errors(value, ANSWER_SCHEMA) == []
    assert isinstance(value["answer"], str)
    assert backend.json_mode == "json_object"  # json_schema was rejected once, then remembered
    assert result.in_token > 0 and result.out_token > 0

    chunks = await _collect(backend, JSON_QUESTION, options)
    assert chunks[-1].final
    assert json.loads("".join(c.text for c in chunks)) == value


async def test_json_schema_mode_rejected_by_llama_cpp_is_a_typed_error(llama_server: LlamaServer) -> None:
    strict = OpenAIBackend(llama_server.model, llama_server.base_url, json_mode="json_schema", backoff_s=0.05)
    try:
        with pytest.raises(LLMError) as info:
            await strict.complete(JSON_QUESTION, CompletionOptions(max_tokens=16, json_schema=ANSWER_SCHEMA))
        assert info.value.type == "llm-error"
        assert "llm-json-mode" in info.value.message
    finally:
        await strict.close()


async def test_truncated_structured_output_is_a_schema_mismatch(backend: OpenAIBackend) -> None:
    # The grammar keeps the output on the schema's path, but 4 tokens cannot close the object.
    options = CompletionOptions(max_tokens=4, json_schema=ANSWER_SCHEMA)
    with pytest.raises(LLMError) as info:
        await backend.complete(JSON_QUESTION, options)
    assert info.value.type == "schema-mismatch"
    with pytest.raises(LLMError) as info:
        await _collect(backend, JSON_QUESTION, options)
    assert info.value.type == "schema-mismatch"


async def test_prompt_longer_than_the_server_context_is_an_llm_error(backend: OpenAIBackend) -> None:
    too_long = [ChatMessage("user", "word " * 2100)]
    with pytest.raises(LLMError) as info:
        await backend.complete(too_long, CompletionOptions(max_tokens=8))
    assert info.value.type in {"llm-error", "llm-unavailable"}
    # The server survives and keeps answering.
    assert (await backend.complete(QUESTION, CompletionOptions(max_tokens=4))).text
