"""The document scale benchmark's deployed topology: one OS process per processor on the real
Pulsar (as bench/harness/fleet.py), serving one flow of the benchmark's own.

The broker is shared with other sessions' fleets, which run their own config service on the
shared config topics: a second config service would take half of their config requests, and a
flow put on theirs is served by every processor that follows it (theirs too, over their stores).
So each process here serves a static config of one flow (`docscale-<hex>`, the default
blueprint) and follows no config topic: nobody else serves that flow, and nothing else stops it.

    python -m bench documents-serve NAME FLOW_ID [PARAMS_JSON]   # one processor (settings: KGFLOW_*)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.harness.fleet import Fleet, _env, _free_port, die_with_parent
from bench.harness.results import ROOT
from processors.stores.settings import StoreSettings
from schemas.flows import ConfigState

# What lazy-rag, kg-query and a document write touch (no model: no text-completion).
DOCUMENTS_FLEET = ("embeddings", "graph-embeddings", "triples", "label-resolver", "extractor", "communities",
                   "reranker", "documents", "document-store", "lazy-rag", "kg-query")  # fmt: skip


def static_config(flow_id: str, parameters: dict[str, Any]) -> ConfigState:
    """A config of one flow of the default blueprint."""
    from processors.base.flow_registry import load_blueprint
    from processors.base.runtime import default_blueprint_path
    from schemas.flows import Flow

    bp = load_blueprint(default_blueprint_path())
    flow = Flow(id=flow_id, blueprint=bp.name, parameters=parameters)
    return ConfigState(version=1, blueprints={bp.name: bp}, flows={flow_id: flow})


class StaticConfig:
    """Stands in for ConfigWatcher: applies one fixed config at start, follows nothing."""

    state: ConfigState | None = None

    def __init__(self, bus: Any, on_config: Callable[[ConfigState], Awaitable[None]]) -> None:
        self._on_config = on_config

    async def start(self) -> None:
        assert self.state is not None
        await self._on_config(self.state)

    async def stop(self) -> None:
        pass


async def serve(name: str, flow_id: str, parameters: dict[str, Any]) -> None:
    """Run processor `name` serving only `flow_id` until SIGTERM (`kgflow run` otherwise)."""
    import processors.base.processor as base
    from processors.base.metrics import serve_metrics
    from processors.base.runtime import make_bus
    from processors.base.settings import RuntimeSettings, from_env
    from processors.commands.serve import _wait_for_signal
    from processors.commands.system import System

    StaticConfig.state = static_config(flow_id, parameters)
    base.ConfigWatcher = StaticConfig  # type: ignore[misc, assignment]
    rt = from_env(RuntimeSettings)
    serve_metrics(rt.metrics_port, rt.metrics_host)
    system = System(make_bus(rt), from_env(StoreSettings), rt)
    try:
        proc = system.build(name)
        await proc.start()
        system.processors.append(proc)
        print(f"kgflow run: {name} ready", file=sys.stderr, flush=True)
        await _wait_for_signal()
    finally:
        await system.stop()


class StaticFleet(Fleet):
    """A Fleet whose processes each serve one static flow (see the module docstring)."""

    flow_id: str = ""
    parameters: dict[str, Any] = {}  # noqa: RUF012 - set per fleet before starting

    async def _start(self, name: str, env: dict[str, str], logs: Path) -> None:
        log = logs / f"{name}.log"
        with log.open("wb") as out:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bench", "documents-serve", name, self.flow_id, json.dumps(self.parameters),
                stdout=out, stderr=asyncio.subprocess.STDOUT, env=env, cwd=ROOT, preexec_fn=die_with_parent,
            )  # fmt: skip
        self.procs[name] = (proc, int(env["KGFLOW_METRICS_PORT"]), log)


@contextlib.asynccontextmanager
async def documents_fleet(
    store: StoreSettings,
    url: str,
    flow_id: str,
    parameters: dict[str, Any],
    runtime_env: dict[str, str],
    names: tuple[str, ...] = DOCUMENTS_FLEET,
) -> AsyncIterator[StaticFleet]:
    """`names`, each its own process serving `flow_id` on Pulsar, all ready; stopped on exit."""
    fleet = StaticFleet()
    fleet.flow_id, fleet.parameters = flow_id, parameters
    with tempfile.TemporaryDirectory(prefix="kgflow-docfleet-") as tmp:
        try:
            for name in names:
                await fleet._start(name, {**_env(store, url, _free_port()), **runtime_env}, Path(tmp))
            await asyncio.gather(*(fleet._ready(n) for n in names))
            yield fleet
        finally:
            await fleet.stop()


async def main(argv: list[str]) -> None:
    """Serve one processor of the benchmark's own flow until stopped."""
    ap = argparse.ArgumentParser(prog="python -m bench documents-serve", description=main.__doc__)
    ap.add_argument("name", help="the processor (settings: KGFLOW_* in the environment)")
    ap.add_argument("flow_id")
    ap.add_argument("parameters", nargs="?", type=json.loads, default={}, help="the flow's parameters (JSON)")
    a = ap.parse_args(argv)
    await serve(a.name, a.flow_id, a.parameters)
