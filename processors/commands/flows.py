"""`kgflow flow ...`: manage blueprints and flows (over the bus, or the embedded registry file)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from processors.base.flow_registry import FlowRegistry, load_blueprint
from processors.commands.options import bus_args, runtime_settings, store_args, store_settings
from schemas.flows import FlowRequest, FlowResponse


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register `kgflow flow` and its subcommands."""
    flow = sub.add_parser("flow", help="manage blueprints and flows").add_subparsers(dest="what", required=True)
    pb = flow.add_parser("put-blueprint", help="store a blueprint (YAML or JSON)")
    pb.add_argument("file", type=Path)
    st = flow.add_parser("start", help="start a flow from a blueprint")
    st.add_argument("flow_id")
    st.add_argument("--blueprint", required=True)
    st.add_argument("--description", default="")
    st.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    flow.add_parser("list", help="list running flows and blueprints")
    sp = flow.add_parser("stop", help="stop a flow")
    sp.add_argument("flow_id")
    for p in (pb, st, sp, flow.choices["list"]):
        store_args(p)
        bus_args(p)
        p.set_defaults(func=run_flow_command)


def _request(a: argparse.Namespace) -> list[FlowRequest]:
    if a.what == "put-blueprint":
        return [FlowRequest(operation="put-blueprint", blueprint=load_blueprint(a.file))]
    if a.what == "start":
        params = {}
        for pair in a.param:
            k, sep, v = pair.partition("=")
            if not sep:
                raise ValueError(f"bad --param {pair!r}: expected NAME=VALUE")
            params[k] = v
        return [
            FlowRequest(
                operation="start-flow",
                flow_id=a.flow_id,
                blueprint_name=a.blueprint,
                description=a.description,
                parameters=params,
            )
        ]
    if a.what == "stop":
        return [FlowRequest(operation="stop-flow", flow_id=a.flow_id)]
    return [FlowRequest(operation="list-flows"), FlowRequest(operation="list-blueprints")]


async def run_flow_command(a: argparse.Namespace) -> int:
    """Send the flow request(s) to the registry and print the result as JSON."""
    rt = runtime_settings(a)
    results: list[FlowResponse] = []
    if rt.bus == "pulsar":
        from processors.base.client import RemoteError
        from processors.base.config_client import config_client
        from processors.base.runtime import make_bus

        bus = make_bus(rt)
        client = config_client(bus)
        try:
            for req in _request(a):
                try:
                    results.append(await client.request(req))
                except RemoteError as e:
                    raise ValueError(e.message) from None
        finally:
            await client.stop()
            await bus.close()
    else:
        registry = FlowRegistry(store_settings(a).home / "flows.json")
        results = [registry.handle(req)[0] for req in _request(a)]
    out: dict[str, object] = {}
    for r in results:
        if r.flow is not None:
            r = r.model_copy(update={"flow": r.flow.redacted()})
        out.update(r.model_dump(exclude_none=True, exclude={"schema_version", "error", "end_of_stream"}))
    print(json.dumps(out or {"ok": True}, indent=1))
    return 0
