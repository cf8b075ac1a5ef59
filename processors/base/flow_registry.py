"""The flow registry (config service): blueprints and flows, persisted, pushed on change."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

from processors.base.bus import Bus, Consumer
from processors.base.errors import BadRequest
from processors.base.registry import Host
from processors.base.settings import ParamModels, RuntimeSettings, flow_params, param_names
from processors.base.tasks import cancel_and_close
from processors.base.wire import error_response
from schemas.flows import Blueprint, ConfigState, Flow, FlowRequest, FlowResponse
from schemas.topics import CONFIG_PUSH, CONFIG_REQUEST, CONFIG_RESPONSE

log = logging.getLogger(__name__)


class FlowRegistry:
    """Pure state: blueprints and running flows, optionally persisted to a JSON file."""

    def __init__(self, path: Path | None = None, params: ParamModels | None = None) -> None:
        """`params`: each processor's flow-parameter model, by name, that a flow's parameters are
        checked against (`processors.commands.catalog.PARAMS`; None: no processor is known)."""
        self.path = path
        self.params: ParamModels = params or {}
        self.state = ConfigState()
        if path and path.exists():
            self.state = ConfigState.model_validate_json(path.read_text())

    def _save(self) -> None:
        self.state.version += 1
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(self.state.model_dump_json(indent=1))
            tmp.replace(self.path)

    def handle(self, req: FlowRequest) -> tuple[FlowResponse, bool]:
        """Apply one operation; returns the response and whether the config changed."""
        st = self.state
        op = req.operation
        if op == "get-config":
            return FlowResponse(config=st), False
        if op == "list-blueprints":
            return FlowResponse(blueprint_names=sorted(st.blueprints)), False
        if op == "list-flows":
            return FlowResponse(flow_ids=sorted(st.flows)), False
        if op in ("put-config-items", "delete-config-items"):
            self._config_items(req)
            self._save()
            return FlowResponse(), True
        if op == "put-blueprint":
            if req.blueprint is None:
                raise BadRequest("put-blueprint needs `blueprint`")
            st.blueprints[req.blueprint.name] = req.blueprint
            self._save()
            return FlowResponse(), True
        name = req.blueprint_name
        if op in ("get-blueprint", "delete-blueprint"):
            if not name or name not in st.blueprints:
                raise BadRequest(f"unknown blueprint {name!r}")
            if op == "get-blueprint":
                return FlowResponse(blueprint=st.blueprints[name]), False
            users = [f.id for f in st.flows.values() if f.blueprint == name]
            if users:
                raise BadRequest(f"blueprint {name!r} is used by running flows {users}")
            del st.blueprints[name]
            self._save()
            return FlowResponse(), True
        fid = req.flow_id
        if not fid:
            raise BadRequest(f"{op} needs `flow_id`")
        if op == "start-flow":
            if not name or name not in st.blueprints:
                raise BadRequest(f"unknown blueprint {name!r}")
            if fid in st.flows:
                raise BadRequest(f"flow {fid!r} is already running")
            flow = Flow(id=fid, blueprint=name, description=req.description or "", parameters=req.parameters or {})
            check_parameters(flow, st.blueprints[name], self.params)  # before anything is stored
            st.flows[fid] = flow
            self._save()
            return FlowResponse(flow=st.flows[fid]), True
        if fid not in st.flows:
            raise BadRequest(f"unknown flow {fid!r}")
        if op == "get-flow":
            return FlowResponse(flow=st.flows[fid]), False
        del st.flows[fid]  # stop-flow
        self._save()
        return FlowResponse(), True

    def _config_items(self, req: FlowRequest) -> None:
        """Write (a value) or delete (no value) the items of one workspace's configuration."""
        if not req.workspace or req.items is None:
            raise BadRequest(f"{req.operation} needs `workspace` and `items`")
        space = self.state.items.setdefault(req.workspace, {})
        for item in req.items:
            if req.operation == "put-config-items":
                if item.value is None:
                    raise BadRequest(f"put-config-items: item {item.type}/{item.key} has no value")
                space.setdefault(item.type, {})[item.key] = item.value
            elif item.key in space.get(item.type, {}):
                del space[item.type][item.key]
                if not space[item.type]:
                    del space[item.type]
        if not space:
            del self.state.items[req.workspace]


def check_parameters(flow: Flow, blueprint: Blueprint, params: ParamModels) -> None:
    """Refuse a flow whose parameters a processor of its blueprint would not accept: each value is
    checked against that processor's parameter model (`params`), and, when every processor of the
    blueprint is known, each name must be one of theirs. Errors name the flow and the parameter as
    written (`max-subgraph-size`)."""
    models = {name: params[name] for name in blueprint.processors if name in params}
    if len(models) == len(blueprint.processors):
        known = {n for m in models.values() if m is not None for n in param_names(m)}
        given = [*blueprint.parameters, *(p for b in blueprint.processors.values() for p in b.parameters),
                 *flow.parameters]  # fmt: skip
        unknown = sorted({n for n in given if n.replace("_", "-") not in known})
        if unknown:
            raise BadRequest(
                f"flow {flow.id!r}: unknown parameter {', '.join(unknown)} (blueprint {blueprint.name!r} "
                f"takes: {', '.join(sorted(known)) or 'none'})"
            )
    for name, model in models.items():
        if model is not None:
            try:
                flow_params(model, flow.processor_parameters(blueprint, name))
            except ValueError as e:
                raise BadRequest(f"flow {flow.id!r}: {e} (processor {name})") from None


class ConfigService:
    """Serves FlowRequests on the config topic and pushes the whole config on every change."""

    name = "config"

    def __init__(self, bus: Bus, registry: FlowRegistry, runtime: RuntimeSettings | None = None) -> None:
        self.bus = bus
        self.registry = registry
        self.runtime = runtime or RuntimeSettings()
        self._consumer: Consumer | None = None
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def create(cls, host: Host) -> ConfigService:
        """The registry of the embedded home (`flows.json`), served on the host's bus."""
        return cls(host.bus, FlowRegistry(host.home / "flows.json", host.param_models), host.runtime)

    async def start(self) -> None:
        """Start serving; pushes the current config once so late watchers converge."""
        self._responses = await self.bus.producer(CONFIG_RESPONSE)
        self._push = await self.bus.producer(CONFIG_PUSH)
        self._consumer = await self.bus.consumer(
            CONFIG_REQUEST, "config", max_redeliveries=self.runtime.max_redeliveries, prefetch=self.runtime.concurrency
        )
        self._task = asyncio.create_task(self._serve(), name="config-service")
        await self._push.send(self.registry.state.model_dump_json().encode(), {})

    async def stop(self) -> None:
        """Stop serving."""
        await cancel_and_close(self._task, self._consumer)

    async def _serve(self) -> None:
        assert self._consumer is not None
        while True:
            msg = await self._consumer.receive()
            rid = msg.properties.get("id", "")
            changed = False
            try:
                res, changed = self.registry.handle(FlowRequest.model_validate_json(msg.data))
            except Exception as e:
                res = error_response(FlowResponse, e)
                log.info("flow request refused: %s", e)
            await self._responses.send(res.model_dump_json().encode(), {"id": rid})
            if changed:
                await self._push.send(self.registry.state.model_dump_json().encode(), {})
            await self._consumer.ack(msg)


def load_blueprint(path: Path) -> Blueprint:
    """Read a YAML (or JSON) blueprint file."""
    import yaml

    text = path.read_text()
    data = yaml.safe_load(text) if path.suffix in (".yaml", ".yml") else json.loads(text)
    return Blueprint.model_validate(data)
