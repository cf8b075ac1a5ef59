"""`kgflow up` (everything) and `kgflow run PROCESSOR` (one, for distributed deployment)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import logging
import signal
import sys

from processors.base.logs import setup_logging
from processors.base.metrics import serve_metrics
from processors.runtime import PROCESSOR_NAMES, System, ensure_default_flow, make_bus

log = logging.getLogger("kgflow")


async def _wait_for_signal() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()


def _has_gateway() -> bool:
    return importlib.util.find_spec("processors.gateway.service") is not None


async def up(a: argparse.Namespace) -> int:
    """Run every processor in this process and start flow `default` from the default blueprint."""
    from processors.cli import runtime_settings, store_settings

    rt = runtime_settings(a)
    setup_logging(rt.log_level)
    serve_metrics(rt.metrics_port, rt.metrics_host)
    system = System(make_bus(rt), store_settings(a), rt)
    try:
        await system.start(["config"])
        await ensure_default_flow(system.bus)
        await system.start([n for n in PROCESSOR_NAMES if n != "config"])
        if not a.no_gateway and _has_gateway():
            gw = system.build("gateway")
            await gw.start(port=a.gateway_port)
            system.processors.append(gw)
        print(
            f"kgflow up: {len(system.processors)} processors serving flow `default` "
            f"({'pulsar ' + rt.pulsar_url if rt.bus == 'pulsar' else 'embedded'})",
            file=sys.stderr,
            flush=True,
        )
        await _wait_for_signal()
    finally:
        await system.stop()
    return 0


async def run(a: argparse.Namespace) -> int:
    """Run one processor until SIGTERM."""
    from processors.cli import runtime_settings, store_settings

    rt = runtime_settings(a)
    setup_logging(rt.log_level)
    serve_metrics(rt.metrics_port, rt.metrics_host)
    if a.processor not in (*PROCESSOR_NAMES, "gateway"):
        raise ValueError(f"unknown processor {a.processor!r}; known: {', '.join((*PROCESSOR_NAMES, 'gateway'))}")
    system = System(make_bus(rt), store_settings(a), rt)
    try:
        proc = system.build(a.processor)
        if a.processor == "gateway":
            await proc.start(port=a.gateway_port)
        else:
            await proc.start()
        system.processors.append(proc)
        print(f"kgflow run: {a.processor} ready", file=sys.stderr, flush=True)
        await _wait_for_signal()
    finally:
        await system.stop()
    return 0
