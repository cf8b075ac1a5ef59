"""Reaching a flow's services from a command: the processors in this process on the embedded
default, or running processors over Pulsar (`--pulsar`)."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from processors.base.bus import Bus
from processors.base.client import RequestResponseClient, RequestTimeout
from processors.commands.options import runtime_settings, store_settings
from schemas.flows import FlowRequest
from schemas.services import Service

FLOW_CHECK_TIMEOUT_S = 10.0


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
    """A client of `service` in `flow`, stopped on exit; a flow nobody runs is an error now, not a
    wait of `timeout_s` for an answer that cannot come."""
    await require_flow(bus, flow)
    client = RequestResponseClient.for_service(bus, service, flow, timeout_s)
    try:
        yield client
    finally:
        await client.stop()


async def require_flow(bus: Bus, flow: str) -> None:
    """Raise ValueError unless the flow registry knows `flow` (an unreachable registry is not an
    error here: the request itself will say so)."""
    from processors.base.config_client import config_client

    registry = config_client(bus, FLOW_CHECK_TIMEOUT_S)
    try:
        flows = (await registry.request(FlowRequest(operation="list-flows"))).flow_ids or []
    except RequestTimeout:
        return
    finally:
        await registry.stop()
    if flow not in flows:
        known = ", ".join(sorted(flows)) or "none"
        raise ValueError(f"no flow {flow!r} is running (flows: {known}); start it with kgflow flow start {flow} ...")
