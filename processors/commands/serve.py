"""`kgflow up` (everything) and `kgflow run PROCESSOR` (one, for distributed deployment)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from typing import TYPE_CHECKING

from processors.base.metrics import serve_metrics
from processors.base.runtime import ensure_default_flow, make_bus
from processors.base.settings import from_env
from processors.commands.catalog import CONFIG, FLOW_PROCESSORS, GATEWAY, processor_entry
from processors.commands.options import runtime_settings, store_settings
from processors.commands.system import System

if TYPE_CHECKING:  # the gateway (aiohttp and its routes) is imported only by the commands that run it
    from processors.gateway.service import GatewayProcessor

log = logging.getLogger("kgflow")


async def _wait_for_signal() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()


def _gateway(system: System, port: int | None) -> GatewayProcessor:
    """The gateway on the system's bus (settings from KGFLOW_GATEWAY_*, the port from the command line)."""
    from processors.gateway.service import GatewayProcessor, GatewaySettings

    settings = from_env(GatewaySettings, {"port": port}, prefix="KGFLOW_GATEWAY_")
    return GatewayProcessor(system.bus, system.runtime, settings, home=system.home, prompts=system.prompts)


def _print_explorer(gw: GatewayProcessor) -> None:
    """Tell the operator where the explorer page is (and that it will ask for a token, when one is needed)."""
    token = " (it asks for the gateway's token)" if gw.auth.enabled else ""
    print(f"kgflow: explorer at {gw.url}{token}", file=sys.stderr, flush=True)


async def up(a: argparse.Namespace) -> int:
    """Run every processor in this process and start flow `default` from the default blueprint."""
    rt = runtime_settings(a)
    serve_metrics(rt.metrics_port, rt.metrics_host)
    system = System(make_bus(rt), store_settings(a), rt)
    try:
        await system.start([CONFIG.name])
        await ensure_default_flow(system.bus)
        await system.start([p.name for p in FLOW_PROCESSORS])
        gw = None
        if not a.no_gateway:
            gw = _gateway(system, a.gateway_port)
            await gw.start()
            system.processors.append(gw)
        print(
            f"kgflow up: {len(system.processors)} processors serving flow `default` "
            f"({'pulsar ' + rt.pulsar_url if rt.bus == 'pulsar' else 'embedded'})",
            file=sys.stderr,
            flush=True,
        )
        if gw is not None:
            _print_explorer(gw)
        await _wait_for_signal()
    finally:
        await system.stop()
    return 0


async def run(a: argparse.Namespace) -> int:
    """Run one processor (or several, in this one process: e.g. a documents-flow worker) until SIGTERM."""
    rt = runtime_settings(a)
    serve_metrics(rt.metrics_port, rt.metrics_host)
    names = list(dict.fromkeys(a.processor))
    for name in names:
        processor_entry(name)  # an unknown name fails here, before the bus is opened
    system = System(make_bus(rt), store_settings(a), rt)
    try:
        for name in names:
            proc = _gateway(system, a.gateway_port) if name == GATEWAY.name else system.build(name)
            await proc.start()
            system.processors.append(proc)
            print(f"kgflow run: {name} ready", file=sys.stderr, flush=True)
            if name == GATEWAY.name:
                _print_explorer(proc)
        await _wait_for_signal()
    finally:
        await system.stop()
    return 0
