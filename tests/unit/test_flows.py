"""Flows started and stopped at run time reach running processors without a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from processors.base.bus import MemoryBus
from processors.base.client import RemoteError, RequestTimeout
from processors.base.config_client import config_client
from processors.base.flow_registry import ConfigService, FlowRegistry, load_blueprint
from processors.base.registry import FLOW_PROCESSORS
from processors.base.runtime import default_blueprint_path
from schemas.flows import Blueprint, FlowRequest, ProcessorBinding
from tests.unit.test_framework import Echo, EchoRequest, client

BLUEPRINT = Blueprint(name="echo-bp", processors={"echo": ProcessorBinding(parameters={"x": 1})})


async def _wait_for(cond, limit_s: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + limit_s
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


async def test_flow_start_and_stop_reach_a_running_processor(tmp_path: Path) -> None:
    bus = MemoryBus()
    registry = ConfigService(bus, FlowRegistry(tmp_path / "flows.json"))
    await registry.start()
    proc = Echo(bus)
    await proc.start()
    cfg = config_client(bus)
    try:
        assert proc.flow_ids == []
        await cfg.request(FlowRequest(operation="put-blueprint", blueprint=BLUEPRINT))
        await cfg.request(FlowRequest(operation="start-flow", flow_id="live", blueprint_name="echo-bp"))
        await _wait_for(lambda: proc.flow_ids == ["live"])
        assert (await client(bus, flow="live").request(EchoRequest(text="x"))).text == "live:x"

        await cfg.request(FlowRequest(operation="stop-flow", flow_id="live"))
        await _wait_for(lambda: proc.flow_ids == [])
        with pytest.raises(RequestTimeout):
            await client(bus, flow="live").request(EchoRequest(text="y"), timeout_s=0.2)
    finally:
        await cfg.stop()
        await proc.stop()
        await registry.stop()


async def test_processor_started_later_picks_up_running_flows(tmp_path: Path) -> None:
    bus = MemoryBus()
    reg = FlowRegistry(tmp_path / "flows.json")
    reg.handle(FlowRequest(operation="put-blueprint", blueprint=BLUEPRINT))
    reg.handle(FlowRequest(operation="start-flow", flow_id="early", blueprint_name="echo-bp"))
    service = ConfigService(bus, FlowRegistry(tmp_path / "flows.json"))  # reloaded from disk
    await service.start()
    proc = Echo(bus)
    await proc.start()
    try:
        assert proc.flow_ids == ["early"]
        assert proc._flows["early"].ctx.parameters == {"x": 1}
    finally:
        await proc.stop()
        await service.stop()


def test_registry_refuses_bad_operations(tmp_path: Path) -> None:
    reg = FlowRegistry(tmp_path / "flows.json")
    with pytest.raises(ValueError, match="unknown blueprint"):
        reg.handle(FlowRequest(operation="start-flow", flow_id="f", blueprint_name="nope"))
    reg.handle(FlowRequest(operation="put-blueprint", blueprint=BLUEPRINT))
    reg.handle(FlowRequest(operation="start-flow", flow_id="f", blueprint_name="echo-bp"))
    with pytest.raises(ValueError, match="already running"):
        reg.handle(FlowRequest(operation="start-flow", flow_id="f", blueprint_name="echo-bp"))
    with pytest.raises(ValueError, match="used by running flows"):
        reg.handle(FlowRequest(operation="delete-blueprint", blueprint_name="echo-bp"))
    with pytest.raises(ValueError, match="unknown flow"):
        reg.handle(FlowRequest(operation="stop-flow", flow_id="other"))


async def test_config_service_answers_errors_over_the_bus(tmp_path: Path) -> None:
    bus = MemoryBus()
    service = ConfigService(bus, FlowRegistry(None))
    await service.start()
    cfg = config_client(bus)
    try:
        with pytest.raises(RemoteError, match="unknown flow"):
            await cfg.request(FlowRequest(operation="get-flow", flow_id="ghost"))
        assert (await cfg.request(FlowRequest(operation="list-flows"))).flow_ids == []
    finally:
        await cfg.stop()
        await service.stop()


def test_default_blueprint_names_every_processor() -> None:
    bp = load_blueprint(default_blueprint_path())
    assert list(bp.processors) == [p.name for p in FLOW_PROCESSORS]  # every flow processor, in start order
