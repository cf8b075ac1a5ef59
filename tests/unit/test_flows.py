"""Flows started and stopped at run time reach running processors without a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from processors.base.bus import MemoryBus
from processors.base.client import RemoteError, RequestResponseClient, RequestTimeout
from processors.base.config_client import config_client
from processors.base.flow_registry import ConfigService, FlowRegistry, load_blueprint
from processors.base.runtime import default_blueprint_path
from processors.commands.catalog import FLOW_PROCESSORS, PARAMS
from schemas.flows import Blueprint, Flow, FlowRequest, ProcessorBinding
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


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"max-subgraph-size": "-3"}, "max-subgraph-size='-3'"),
        ({"entity-limit": -5}, "entity-limit=-5"),
        ({"max-subgraph-sise": 10}, "unknown parameter max-subgraph-sise"),
        ({"llm": "loud"}, "llm='loud'"),
        ({"extractor": "gpt"}, "extractor='gpt': Input should be 'concepts' or 'llm' (processor document-load)"),
        ({"extractor-concurrency": 0}, "extractor-concurrency=0"),
    ],
)
def test_start_flow_refuses_bad_parameters_and_stores_nothing(
    tmp_path: Path, params: dict[str, object], named: str
) -> None:
    reg = FlowRegistry(tmp_path / "flows.json", PARAMS)
    reg.handle(FlowRequest(operation="put-blueprint", blueprint=load_blueprint(default_blueprint_path())))
    saved = (tmp_path / "flows.json").read_text()
    with pytest.raises(ValueError) as err:
        reg.handle(FlowRequest(operation="start-flow", flow_id="f1", blueprint_name="default", parameters=params))
    assert "flow 'f1'" in str(err.value) and named in str(err.value), err.value
    assert reg.state.flows == {} and (tmp_path / "flows.json").read_text() == saved
    ok = {"max-subgraph-size": "300", "label-cache-ttl": 5, "llm-api-key": "k", "extractor": "llm"}
    reg.handle(FlowRequest(operation="start-flow", flow_id="f2", blueprint_name="default", parameters=ok))
    assert list(reg.state.flows) == ["f2"]


class Picky(Echo):
    """An echo processor that cannot build state for flows with x=bad."""

    async def on_flow_start(self, flow) -> None:  # type: ignore[no-untyped-def]
        if flow.parameters.get("x") == "bad":
            raise ValueError("x must not be bad")


async def test_a_flow_a_processor_cannot_start_leaves_the_others_served(tmp_path: Path) -> None:
    bus = MemoryBus()
    reg = FlowRegistry(tmp_path / "flows.json")
    reg.handle(FlowRequest(operation="put-blueprint", blueprint=BLUEPRINT))
    for fid, x in (("a-bad", "bad"), ("b-good", "good")):
        reg.handle(FlowRequest(operation="start-flow", flow_id=fid, blueprint_name="echo-bp", parameters={"x": x}))
    service = ConfigService(bus, reg)
    await service.start()
    proc = Picky(bus)
    await proc.start()  # does not raise
    cfg = config_client(bus)
    try:
        assert proc.flow_ids == ["b-good"]
        assert (await client(bus, flow="b-good").request(EchoRequest(text="x"))).text == "b-good:x"
        # flows started later are still served
        await cfg.request(FlowRequest(operation="start-flow", flow_id="c-new", blueprint_name="echo-bp"))
        await _wait_for(lambda: "c-new" in proc.flow_ids)
        assert (await client(bus, flow="c-new").request(EchoRequest(text="y"))).text == "c-new:y"
    finally:
        await cfg.stop()
        await proc.stop()
        await service.stop()


async def test_embedded_system_serves_default_despite_a_stored_bad_flow(tmp_path: Path) -> None:
    """A flows.json written before parameters were checked (or edited by hand) keeps a bad flow:
    the processors skip it and every command on the embedded default still works."""
    from processors.commands.system import embedded
    from processors.stores.settings import StoreSettings
    from schemas.graph_rag import GraphRagRequest, GraphRagResponse
    from schemas.services import GRAPH_RAG

    home = tmp_path / "home"
    reg = FlowRegistry(home / "flows.json")
    reg.handle(FlowRequest(operation="put-blueprint", blueprint=load_blueprint(default_blueprint_path())))
    reg.state.flows["f1"] = Flow(id="f1", blueprint="default", parameters={"max-subgraph-size": -3})
    reg._save()  # noqa: SLF001 - as an older kgflow stored it
    async with embedded(StoreSettings(home=home)) as system:
        rag = RequestResponseClient.for_service(system.bus, GRAPH_RAG, "default", 20)
        res: GraphRagResponse = await rag.request(GraphRagRequest(user="u", collection="c", query="q", no_llm=True))
        await rag.stop()
        assert res.error is None
        assert "f1" not in system.processor("graph-rag").flow_ids
