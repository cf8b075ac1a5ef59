"""Flow management: blueprints, flows and the config pushed to processors."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field, model_serializer

from schemas.base import Message, Response

# Parameters whose names say they hold a secret are never shown to clients (they reach processors only).
SECRET_NAME = re.compile(r"key|secret|token|password", re.IGNORECASE)
REDACTED = "<redacted>"
MAX_PARAMETER_DEPTH = 16  # lists/objects inside a parameter value: no real parameter nests deeper


def _shallow(parameters: dict[str, Any]) -> dict[str, Any]:
    """`parameters` if no value nests lists/objects deeper than MAX_PARAMETER_DEPTH (checked
    without recursion: every processor parses the config these values travel in)."""
    stack = [(v, 1) for v in parameters.values()]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list):
            if depth > MAX_PARAMETER_DEPTH:
                raise ValueError(f"a parameter value is nested too deeply (over {MAX_PARAMETER_DEPTH} levels)")
            stack.extend((x, depth + 1) for x in (value.values() if isinstance(value, dict) else value))
    return parameters


Parameters = Annotated[dict[str, Any], AfterValidator(_shallow)]


def redact(parameters: dict[str, Any]) -> dict[str, Any]:
    """`parameters` with the value of every secret-named parameter (`llm-api-key`, ...) replaced."""
    return {k: REDACTED if SECRET_NAME.search(k) and v not in (None, "") else v for k, v in parameters.items()}


class ProcessorBinding(BaseModel):
    """One processor's role in a blueprint: its parameters (the topics follow from the flow id)."""

    parameters: Parameters = {}


class Blueprint(BaseModel):
    """A flow template: which processors serve it and their parameter defaults."""

    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    processors: dict[str, ProcessorBinding]
    parameters: Parameters = {}

    def redacted(self) -> Blueprint:
        """This blueprint as clients may see it (secret parameters replaced)."""
        procs = {n: ProcessorBinding(parameters=redact(b.parameters)) for n, b in self.processors.items()}
        return self.model_copy(update={"parameters": redact(self.parameters), "processors": procs})


class Flow(BaseModel):
    """A running flow: a blueprint instance with its id and parameter overrides."""

    id: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.-]+$")
    blueprint: str
    description: str = ""
    parameters: Parameters = {}

    def processor_parameters(self, blueprint: Blueprint, processor: str) -> dict[str, Any]:
        """Blueprint defaults, then the processor's own, then the flow's overrides."""
        merged = dict(blueprint.parameters)
        merged.update(blueprint.processors[processor].parameters)
        merged.update(self.parameters)
        return merged

    def redacted(self) -> Flow:
        """This flow as clients may see it (secret parameters replaced)."""
        return self.model_copy(update={"parameters": redact(self.parameters)})


class ConfigItem(BaseModel):
    """One item of a workspace's key/value configuration (TrustGraph's config service: `type`, `key`,
    `value`, e.g. a prompt template, a tool, a token cost). `value` is None in a delete."""

    type: str = Field(min_length=1, max_length=256)
    key: str = Field(min_length=1, max_length=1024)
    value: str | None = Field(default=None, max_length=1 << 20)


# workspace -> type -> key -> value
ConfigItems = dict[str, dict[str, dict[str, str]]]


class ConfigState(BaseModel):
    """Everything processors need to know: pushed whole on every change."""

    version: int = 0
    blueprints: dict[str, Blueprint] = {}
    flows: dict[str, Flow] = {}
    items: ConfigItems = {}

    def redacted(self) -> ConfigState:
        """The configuration as clients may see it (secret parameters replaced; no workspace's config
        items, which each workspace reads through the config service)."""
        return self.model_copy(
            update={
                "blueprints": {n: b.redacted() for n, b in self.blueprints.items()},
                "flows": {n: f.redacted() for n, f in self.flows.items()},
                "items": {},
            }
        )


class FlowRequest(Message):
    """A flow-management operation (TrustGraph's operation names)."""

    operation: Literal[
        "put-blueprint",
        "get-blueprint",
        "list-blueprints",
        "delete-blueprint",
        "start-flow",
        "stop-flow",
        "list-flows",
        "get-flow",
        "get-config",
        "put-config-items",
        "delete-config-items",
    ]
    blueprint_name: str | None = None
    blueprint: Blueprint | None = None
    flow_id: str | None = None
    description: str | None = None
    parameters: Parameters | None = None
    workspace: str | None = Field(default=None, min_length=1, max_length=256)  # of config items
    items: list[ConfigItem] | None = Field(default=None, max_length=10_000)

    @model_serializer(mode="wrap")
    def _without_unset_items(self, handler: Any) -> Any:
        """Leave `workspace` and `items` out unless set: a flow registry of an earlier kgflow, which forbids
        fields it does not know, still reads every other operation."""
        data = handler(self)
        for name in ("workspace", "items"):
            if isinstance(data, dict) and data.get(name) is None:
                data.pop(name, None)
        return data


class FlowResponse(Response):
    """Result of a flow operation."""

    blueprint_names: list[str] | None = None
    blueprint: Blueprint | None = None
    flow_ids: list[str] | None = None
    flow: Flow | None = None
    config: ConfigState | None = None


class GraphChanged(Message):
    """Notice that triples of a collection were written or deleted (cache invalidation)."""

    user: str
    collection: str
    iris: list[str] | None = None  # None: the whole collection changed
