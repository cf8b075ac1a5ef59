"""Reaching a flow's services from a command: the processors in this process on the embedded
default, or running processors over Pulsar (`--pulsar`)."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from processors.base.bus import Bus
from processors.base.client import RequestResponseClient
from processors.commands.options import runtime_settings, store_settings
from schemas.services import Service


def require_data(a: argparse.Namespace) -> None:
    """Refuse to query an embedded home that holds nothing (instead of creating an empty one)."""
    if runtime_settings(a).bus == "pulsar":
        return
    stores = store_settings(a)
    if stores.triples_backend == "sqlite" and not (stores.home / "graph.db").exists():
        raise ValueError(
            f"no kgflow data in {stores.home.resolve()} (set --home or KGFLOW_HOME, or load first: "
            "kgflow load triples FILE --collection C, or kgflow load documents PATH --collection C)"
        )


@contextlib.asynccontextmanager
async def flow_bus(a: argparse.Namespace) -> AsyncIterator[Bus]:
    """A bus on which flow `default` (and the others) are served."""
    rt = runtime_settings(a)
    if rt.bus == "pulsar":
        from processors.base.runtime import make_bus

        bus = make_bus(rt)
        try:
            yield bus
        finally:
            await bus.close()
        return
    from processors.base.runtime import embedded

    async with embedded(store_settings(a), rt) as system:
        yield system.bus


@contextlib.asynccontextmanager
async def service_client(
    bus: Bus, service: Service, flow: str, timeout_s: float
) -> AsyncIterator[RequestResponseClient[Any]]:
    """A client of `service` in `flow`, stopped on exit."""
    client = RequestResponseClient.for_service(bus, service, flow, timeout_s)
    try:
        yield client
    finally:
        await client.stop()
