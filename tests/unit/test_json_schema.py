"""Structured output is checked against the whole client schema (the `jsonschema` package), and a
schema that is not JSON Schema is refused by the text-completion service before any model runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from processors.base.client import RemoteError, RequestResponseClient
from processors.commands.system import embedded
from processors.models.text_completion.backend import LLMError
from processors.models.text_completion.json_schema import check_schema, parse_and_validate, schema_errors
from processors.stores.settings import StoreSettings
from schemas.services import TEXT_COMPLETION
from schemas.text_completion import TextCompletionRequest

PERSON = {
    "$defs": {"name": {"type": "string", "pattern": "^[A-Z][a-z]+$"}},
    "type": "object",
    "properties": {
        "name": {"$ref": "#/$defs/name"},
        "age": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]},
    },
    "required": ["name", "age"],
}


def test_keywords_the_hand_written_validator_ignored_are_checked() -> None:
    assert schema_errors({"name": "Marie", "age": 66}, PERSON) == []
    assert schema_errors({"name": "Marie", "age": None}, PERSON) == []
    bad_pattern = schema_errors({"name": "marie curie", "age": 66}, PERSON)  # $ref -> pattern
    assert len(bad_pattern) == 1 and bad_pattern[0].startswith("$.name:") and "does not match" in bad_pattern[0]
    bad_any = schema_errors({"name": "Marie", "age": "sixty"}, PERSON)  # anyOf
    assert len(bad_any) == 1 and bad_any[0].startswith("$.age:")
    assert schema_errors({"name": "Marie", "age": -1}, PERSON)  # minimum inside anyOf
    with pytest.raises(LLMError) as info:
        parse_and_validate('{"name": "Marie", "age": "sixty"}', PERSON)
    assert info.value.type == "schema-mismatch" and "$.age" in info.value.message


def test_paths_name_array_items() -> None:
    errors = schema_errors({"tags": ["a", 2]}, {"properties": {"tags": {"items": {"type": "string"}}}})
    assert errors == ["$.tags[1]: 2 is not of type 'string'"]


@pytest.mark.parametrize(
    "schema",
    [{"type": "strnig"}, {"properties": {"a": {"pattern": "("}}}, {"required": "name"}, {"anyOf": []}],
)
def test_a_schema_that_is_not_json_schema_is_refused(schema: dict) -> None:
    with pytest.raises(LLMError) as info:
        check_schema(schema)
    assert info.value.type == "bad-request" and "not a valid JSON Schema" in info.value.message


async def test_text_completion_refuses_an_invalid_client_schema(tmp_path: Path) -> None:
    async with embedded(StoreSettings(home=tmp_path / "home")) as system:
        client = RequestResponseClient.for_service(system.bus, TEXT_COMPLETION, "default", 30)
        await client.start()
        try:
            with pytest.raises(RemoteError) as info:
                await client.request(TextCompletionRequest(prompt="hi", json_schema={"type": "strnig"}))
            assert info.value.type == "bad-request" and "json_schema" in info.value.message
            ok = await client.request(TextCompletionRequest(prompt="hi", json_schema=PERSON))
            assert ok.configured is False  # a valid schema goes on to the (unconfigured) model
        finally:
            await client.stop()


def test_a_response_of_an_earlier_kgflow_is_still_read() -> None:
    """Its processors sent hard-coded counts that the stores now count: taken, never sent again."""
    from schemas.documents import DocumentsResponse
    from schemas.triples import TriplesResponse

    docs = DocumentsResponse.model_validate_json('{"stored": 2, "store_round_trips": 1}')
    assert docs.stored == 2 and "store_round_trips" not in docs.model_dump_json()
    triples = TriplesResponse.model_validate_json('{"labels": {"a": "A"}, "store_round_trips": 3, "stored": 0}')
    assert triples.labels == {"a": "A"} and "store_round_trips" not in triples.model_dump_json()
