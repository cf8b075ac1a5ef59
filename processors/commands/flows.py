"""`kgflow flow ...`: manage blueprints and flows (over the bus, or the embedded registry file)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from processors.base.flow_registry import load_blueprint
from processors.commands.connect import client
from processors.commands.options import bus_args, store_args


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
        p.add_argument("--url", help="gateway URL (default: the embedded registry, or --pulsar)")
        p.add_argument("--token", help="gateway token (or KGFLOW_GATEWAY_TOKEN)")
        store_args(p)
        bus_args(p)
        p.set_defaults(func=run_flow_command)


def _params(pairs: list[str]) -> dict[str, str]:
    params = {}
    for pair in pairs:
        k, sep, v = pair.partition("=")
        if not sep:
            raise ValueError(f"bad --param {pair!r}: expected NAME=VALUE")
        params[k] = v
    return params


async def run_flow_command(a: argparse.Namespace) -> int:
    """Run the flow operation through the API (the registry file when nothing runs here yet) and
    print the result as JSON."""
    async with client(a) as kg:
        if a.what == "put-blueprint":
            await kg.put_blueprint(a.file)
            out: dict[str, object] = {"blueprint": load_blueprint(a.file).name}
        elif a.what == "start":
            flow = await kg.start_flow(a.flow_id, a.blueprint, _params(a.param), a.description)
            out = {"flow": flow.redacted().model_dump(exclude_none=True) if flow else {"id": a.flow_id}}
        elif a.what == "stop":
            await kg.stop_flow(a.flow_id)
            out = {"stopped": a.flow_id}
        else:
            found = await kg.flows()
            out = {"flow_ids": found["flows"], "blueprint_names": found["blueprints"]}
    print(json.dumps(out, indent=1))
    return 0
