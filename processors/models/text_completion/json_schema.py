"""A small JSON Schema validator for the subset structured output uses.

Supported keywords: ``type`` (object, array, string, number, integer, boolean,
null, or a list of them), ``properties``, ``required``, ``additionalProperties``
(boolean or schema), ``items``, ``enum``, ``const``, ``minItems``/``maxItems``
and ``minLength``/``maxLength``. Unknown keywords are ignored, as JSON Schema
does. No third-party dependency.
"""

from __future__ import annotations

import json
from typing import Any

from processors.models.text_completion.backend import LLMError

_MAX_ERRORS = 20


def _type_ok(value: Any, type_name: str) -> bool:
    """Tell whether `value` is of the JSON Schema type `type_name`."""
    if type_name == "object":
        return isinstance(value, dict)
    if type_name == "array":
        return isinstance(value, list)
    if type_name == "string":
        return isinstance(value, str)
    if type_name == "boolean":
        return isinstance(value, bool)
    if type_name == "null":
        return value is None
    if isinstance(value, bool):  # bool is an int in Python, never a number in JSON
        return False
    if type_name == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if type_name == "number":
        return isinstance(value, (int, float))
    return True  # an unknown type name constrains nothing


def _validate(value: Any, schema: Any, path: str, errors: list[str]) -> None:
    """Append to `errors` every way `value` at `path` breaks `schema`."""
    if len(errors) >= _MAX_ERRORS:
        return
    if schema is True or schema is None:
        return
    if schema is False:
        errors.append(f"{path}: no value is allowed here")
        return
    if not isinstance(schema, dict):
        return

    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_type_ok(value, t) for t in types):
            errors.append(f"{path}: expected {' or '.join(map(str, types))}, got {_json_type(value)}")
            return
    if "enum" in schema and not any(_json_equal(value, e) for e in schema["enum"]):
        errors.append(f"{path}: {value!r} is not one of {schema['enum']!r}")
    if "const" in schema and not _json_equal(value, schema["const"]):
        errors.append(f"{path}: {value!r} is not {schema['const']!r}")

    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(f"{path}: shorter than {schema['minLength']}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{path}: longer than {schema['maxLength']}")
    elif isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append(f"{path}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{path}: more than {schema['maxItems']} items")
        items = schema.get("items")
        if isinstance(items, list):  # tuple form (draft 4-7)
            for i, (item, item_schema) in enumerate(zip(value, items, strict=False)):
                _validate(item, item_schema, f"{path}[{i}]", errors)
        elif items is not None:
            for i, item in enumerate(value):
                _validate(item, items, f"{path}[{i}]", errors)
    elif isinstance(value, dict):
        properties = schema.get("properties") or {}
        for name in schema.get("required") or []:
            if name not in value:
                errors.append(f"{path}: missing required property {name!r}")
        additional = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in properties:
                _validate(item, properties[key], f"{path}.{key}", errors)
            elif additional is False:
                errors.append(f"{path}: unexpected property {key!r}")
            elif isinstance(additional, dict):
                _validate(item, additional, f"{path}.{key}", errors)


_JSON_TYPES = (
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (dict, "object"),
)


def _json_type(value: Any) -> str:
    """Name the JSON type of a decoded value (bool before int: a bool is an int in Python)."""
    if value is None:
        return "null"
    return next((name for cls, name in _JSON_TYPES if isinstance(value, cls)), type(value).__name__)


def _json_equal(a: Any, b: Any) -> bool:
    """Compare two decoded JSON values, keeping booleans apart from numbers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


def schema_errors(value: Any, schema: dict[str, Any]) -> list[str]:
    """Return the ways `value` breaks `schema` (empty when it conforms)."""
    errors: list[str] = []
    _validate(value, schema, "$", errors)
    return errors


def validate(value: Any, schema: dict[str, Any]) -> None:
    """Raise `LLMError("schema-mismatch", ...)` unless `value` conforms to `schema`."""
    errors = schema_errors(value, schema)
    if errors:
        raise LLMError("schema-mismatch", "; ".join(errors))


def parse_and_validate(text: str, schema: dict[str, Any]) -> Any:
    """Decode `text` as JSON and validate it; raise `LLMError("schema-mismatch")` otherwise.
    A raw control character inside a string (a newline a small model writes under a grammar) is
    accepted, as most JSON readers do."""
    try:
        value = json.loads(text, strict=False)
    except (json.JSONDecodeError, TypeError) as exc:
        raise LLMError("schema-mismatch", f"output is not valid JSON: {exc}") from exc
    validate(value, schema)
    return value
