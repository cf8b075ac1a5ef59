"""What every kgflow process needs from the framework: its bus, the shipped flow blueprints, the
default flow started, its BLAS threads bounded. (Processors are assembled into a running system at
the wiring level: `processors.commands.system`.)"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from processors.base.bus import Bus, MemoryBus
from processors.base.flow_registry import load_blueprint
from processors.base.settings import RuntimeSettings
from schemas.flows import FlowRequest

# The repo's flows/ (source checkout, editable install), else the copy a wheel installs.
FLOWS_DIR = next(
    (
        d
        for d in (Path(__file__).resolve().parents[2] / "flows", Path(sys.prefix) / "share" / "kgflow" / "flows")
        if d.is_dir()
    ),
    Path(sys.prefix) / "share" / "kgflow" / "flows",
)
DEFAULT_FLOW = "default"


def make_bus(rt: RuntimeSettings) -> Bus:
    """The bus the settings name."""
    if rt.bus == "pulsar":
        try:
            from processors.base.pulsar_bus import PulsarBus
        except ImportError as e:  # pulsar-client is in the `distributed` extra
            raise RuntimeError(f"the Pulsar bus needs pip install 'kgflow[distributed]' ({e})") from None
        return PulsarBus(rt.pulsar_url)
    return MemoryBus()


def default_blueprint_path() -> Path:
    """The shipped blueprint of flow `default`: every service."""
    return FLOWS_DIR / "default.yaml"


def limit_blas_threads(threads: int) -> None:
    """At most `threads` BLAS threads in this process from now on (numpy's vector search and
    ranking are small products: a second thread saves little and spins while idle)."""
    # threadpoolctl limits only BLAS libraries already loaded (a `kgflow run` process imports
    # numpy later, and kept two spinning threads; figures in bench/README.md)
    import numpy  # noqa: F401
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads, user_api="blas")


async def ensure_default_flow(bus: Bus, flow_id: str = DEFAULT_FLOW, params: dict[str, Any] | None = None) -> None:
    """Put (or update) the shipped default blueprint and start flow `flow_id` unless it runs."""
    from processors.base.config_client import config_client

    client = config_client(bus)
    try:
        bp = load_blueprint(default_blueprint_path())
        names = (await client.request(FlowRequest(operation="list-blueprints"))).blueprint_names or []
        stored = None
        if bp.name in names:
            stored = (await client.request(FlowRequest(operation="get-blueprint", blueprint_name=bp.name))).blueprint
        if stored != bp:  # new, or shipped by an older kgflow: processors follow the update
            await client.request(FlowRequest(operation="put-blueprint", blueprint=bp))
        flows = (await client.request(FlowRequest(operation="list-flows"))).flow_ids or []
        if flow_id not in flows:
            await client.request(
                FlowRequest(operation="start-flow", flow_id=flow_id, blueprint_name=bp.name, parameters=params or {})
            )
    finally:
        await client.stop()
