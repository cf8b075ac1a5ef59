"""TrustGraph's `config` workspace service on kgflow: a key/value store per workspace (type, key, value),
kept by the flow registry (persisted with the flows, pushed to processors), plus kgflow's prompts.

Operations (trustgraph-cli 2.11.1's wire): `get` (`keys`), `list` (`type`), `getvalues` (`type`),
`getvalues-all-ws`, `put` (`values`), `delete` (`keys`), `config` (everything). A missing key reads as
`value: null`, as in TrustGraph. Items are stored as given: kgflow keeps tools, MCP tools, token costs
and the like for TrustGraph's tools to read back, but no kgflow service acts on them.

Prompts (type `prompt`): kgflow's services keep their prompts as code beside their algorithms; the
gateway is handed their table (`schemas.prompts.Prompts`) and shows each read-only as `template.<id>`
(its system instruction, response type, schema and service); writing or deleting one is refused.
`prompt/system` and any other `template.<id>` are ordinary items: the system prompt and templates
of the `prompt` flow service (`tg-invoke-prompt`), which fills a template's `{{name}}` placeholders
and asks the flow's text-completion.
"""

from __future__ import annotations

import json
import re
from typing import Any

from processors.gateway.translate import BadRequest, NotSupported, require_object, validate_as
from schemas.flows import ConfigItem, ConfigItems
from schemas.prompts import Prompts

PROMPT = "prompt"
SYSTEM_KEY = "system"
TEMPLATE = "template."
DEFAULT_SYSTEM = "You are a helpful assistant. Answer from the request alone."
READ_OPS = ("get", "list", "getvalues", "getvalues-all-ws", "config")
WRITE_OPS = ("put", "delete")
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_-]*)\s*\}\}")


def workspace_items(prompts: Prompts, items: ConfigItems, workspace: str) -> dict[str, dict[str, str]]:
    """A workspace's items by type, with kgflow's `prompts` (read-only) and the default system prompt."""
    mine = {t: dict(keys) for t, keys in items.get(workspace, {}).items()}
    shown = mine.setdefault(PROMPT, {})
    shown.setdefault(SYSTEM_KEY, json.dumps(DEFAULT_SYSTEM))
    shown.update({f"{TEMPLATE}{id_}": p.value() for id_, p in prompts.items()})
    return mine


def _keys(wire: dict[str, Any], field: str) -> list[ConfigItem]:
    raw = wire.get(field)
    if not isinstance(raw, list):
        raise BadRequest(f"invalid request: {field}: expected a list of objects with `type` and `key`")
    return [validate_as(ConfigItem, require_object(k, f"{field}[{i}]"), f"{field}[{i}].") for i, k in enumerate(raw)]


def _type(wire: dict[str, Any]) -> str:
    kind = wire.get("type")
    if not isinstance(kind, str) or not kind:
        raise BadRequest("invalid request: type: a config type is required")
    return kind


def read(op: str, wire: dict[str, Any], prompts: Prompts, items: ConfigItems, workspace: str, version: int,
         all_workspaces: list[str]) -> dict[str, Any]:  # fmt: skip
    """The answer of a read operation (`READ_OPS`)."""
    mine = workspace_items(prompts, items, workspace)
    if op == "config":
        return {"config": mine, "version": version}
    if op == "get":
        got = [(k.type, k.key, mine.get(k.type, {}).get(k.key)) for k in _keys(wire, "keys")]
        return {"values": [{"type": t, "key": k, "value": v} for t, k, v in got], "version": version}
    kind = _type(wire)
    if op == "list":
        return {"directory": sorted(mine.get(kind, {})), "version": version}
    if op == "getvalues":
        return {"values": [{"type": kind, "key": k, "value": v} for k, v in sorted(mine.get(kind, {}).items())],
                "version": version}  # fmt: skip
    values = []  # getvalues-all-ws: every workspace the caller may read
    for ws in all_workspaces:
        for k, v in sorted(workspace_items(prompts, items, ws).get(kind, {}).items()):
            values.append({"type": kind, "key": k, "value": v, "workspace": ws})
    return {"values": values, "version": version}


def write_items(op: str, wire: dict[str, Any], prompts: Prompts) -> list[ConfigItem]:
    """The items a write operation (`put` / `delete`) changes; kgflow's own `prompts` are refused."""
    items, kept = _keys(wire, "values" if op == "put" else "keys"), []
    for item in items:
        if op == "put" and item.value is None:
            raise BadRequest(f"invalid request: values: {item.type}/{item.key} has no value")
        own = prompts.get(item.key.removeprefix(TEMPLATE)) if item.key.startswith(TEMPLATE) else None
        if item.type == PROMPT and own is not None:
            if op == "put" and item.value == own.value():
                continue  # putting back what kgflow shows (a re-imported export) changes nothing
            raise NotSupported(
                f"prompt {item.key} is kgflow's own and read-only: kgflow's prompts are code "
                f"(the {own.service} service's); writing it is not supported by kgflow"
            )
        kept.append(item)
    return kept


def render(template: str, variables: dict[str, Any]) -> str:
    """A template with its `{{name}}` placeholders filled (a missing variable is a BadRequest)."""

    def fill(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in variables:
            raise BadRequest(f"invalid request: variables: the template needs {name!r}")
        value = variables[name]
        return value if isinstance(value, str) else json.dumps(value)

    return _PLACEHOLDER.sub(fill, template)


def prompt_call(wire: object, prompts: Prompts, items: ConfigItems, workspace: str) -> tuple[str, str, bool]:
    """(system, prompt, streaming) of a `prompt` service request: template `id` with `variables`."""
    wire = require_object(wire)
    id_, variables = wire.get("id"), wire.get("variables") or {}
    if not isinstance(id_, str) or not id_:
        raise BadRequest("invalid request: id: the template id is required")
    if not isinstance(variables, dict):
        raise BadRequest("invalid request: variables: expected an object")
    if id_ in prompts:
        raise NotSupported(f"prompt {id_!r} is used by its kgflow service and is not invocable alone; "
                         "ask the service instead (not supported by kgflow)")  # fmt: skip
    shown = workspace_items(prompts, items, workspace)[PROMPT]
    raw = shown.get(f"{TEMPLATE}{id_}")
    if raw is None:
        known = sorted(k.removeprefix(TEMPLATE) for k in shown if k.startswith(TEMPLATE))
        raise BadRequest(f"invalid request: id: no prompt template {id_!r} (templates: {', '.join(known)})")
    try:
        template = json.loads(raw).get("prompt", "")
        system = json.loads(shown[SYSTEM_KEY])
    except (ValueError, AttributeError):
        raise BadRequest(f"prompt template {id_!r} or the system prompt is not JSON") from None
    return str(system), render(str(template), variables), wire.get("streaming") is True
