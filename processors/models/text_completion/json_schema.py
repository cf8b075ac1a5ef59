"""Structured output checked against a JSON Schema, with the `jsonschema` package.

Every keyword of the schema's draft is checked (`anyOf`, `$ref`, `pattern`, ...; Draft 2020-12 when the
schema names no `$schema`), so a client's schema is never accepted and then silently half-applied. A
schema that is not itself valid JSON Schema is refused before any model runs (`check_schema`).
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator, SchemaError
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from pydantic import JsonValue

from processors.models.text_completion.backend import LLMError

_MAX_ERRORS = 20
JsonSchema = dict[str, Any]  # a JSON Schema document, as a request carries it


def _validator(schema: JsonSchema) -> Validator:
    """The validator of the draft `schema` names (2020-12 by default); a malformed schema is an LLMError."""
    cls = validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "<root>"
        raise LLMError("bad-request", f"json_schema is not a valid JSON Schema at {where}: {exc.message}") from None
    return cls(schema)


def check_schema(schema: JsonSchema) -> None:
    """Raise `LLMError("bad-request")` unless `schema` is a valid JSON Schema."""
    _validator(schema)


def _path(error: ValidationError) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)


def schema_errors(value: JsonValue, schema: JsonSchema) -> list[str]:
    """Return the ways `value` breaks `schema` (empty when it conforms), at most 20, each with its path."""
    errors = sorted(_validator(schema).iter_errors(value), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{_path(e)}: {e.message}" for e in errors[:_MAX_ERRORS]]


def validate(value: JsonValue, schema: JsonSchema) -> None:
    """Raise `LLMError("schema-mismatch", ...)` unless `value` conforms to `schema`."""
    errors = schema_errors(value, schema)
    if errors:
        raise LLMError("schema-mismatch", "; ".join(errors))


def parse_and_validate(text: str, schema: JsonSchema) -> JsonValue:
    """Decode `text` as JSON and validate it; raise `LLMError("schema-mismatch")` otherwise.
    A raw control character inside a string (a newline a small model writes under a grammar) is
    accepted, as most JSON readers do."""
    try:
        value = json.loads(text, strict=False)
    except (json.JSONDecodeError, TypeError) as exc:
        raise LLMError("schema-mismatch", f"output is not valid JSON: {exc}") from exc
    validate(value, schema)
    return value
