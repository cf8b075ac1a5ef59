"""The Pulsar bus backend against a real broker, with processors in separate OS processes.

The processor under test is tests/integration/workers/echo.py (a FlowProcessor on
PulsarBus); the test process talks to it with the real RequestResponseClient.
Every test uses its own flow id, hence its own topics.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from processors.base.client import RemoteError, RequestResponseClient
from processors.base.config_client import config_client
from processors.base.flow_registry import ConfigService, FlowRegistry
from processors.base.pulsar_bus import DEAD_LETTER_SUBSCRIPTION, PulsarBus
from schemas.flows import Blueprint, FlowRequest, ProcessorBinding
from schemas.topics import dead_letter, topic
from tests.integration.pulsar_helpers import Procs, consumer_count, running, topic_stats, wait_until
from tests.integration.workers.echo import SERVICE, EchoRequest, EchoResponse

pytestmark = pytest.mark.usefixtures("servers")

NACK_DELAY_MS = 200


def new_flow() -> str:
    """A flow id no other test (or test run) uses."""
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def bus(servers: Any) -> AsyncIterator[PulsarBus]:
    """A PulsarBus for the test process."""
    b = PulsarBus(servers.pulsar_url, nack_delay_ms=NACK_DELAY_MS)
    try:
        yield b
    finally:
        await b.close()


def echo_client(bus: PulsarBus, flow_id: str, timeout_s: float = 30.0) -> RequestResponseClient[EchoResponse]:
    """A client of the echo service of `flow_id`."""
    return RequestResponseClient(
        bus, topic(SERVICE, flow_id), topic(SERVICE, flow_id, "response"), EchoResponse, timeout_s
    )


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    """This test's child processes, killed at its end."""
    with running(tmp_path / "logs") as ps:
        yield ps


@pytest.fixture(scope="module")
def served_flow(servers: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One echo worker process serving one flow, shared by the single-instance tests."""
    flow_id = new_flow()
    with running(tmp_path_factory.mktemp("served-flow-logs")) as ps:
        ps.echo_worker("echo", servers.pulsar_url, "--flow", flow_id).wait_for("ready")
        yield flow_id


async def test_request_response_round_trip(bus: PulsarBus, served_flow: str) -> None:
    client = echo_client(bus, served_flow)
    try:
        res = await client.request(EchoRequest(text="hello"))
        assert res.text == "hello" and res.error is None and res.end_of_stream
        # Concurrent requests on one client: each answer reaches its own caller.
        texts = [f"m{i}" for i in range(20)]
        answers = await asyncio.gather(*(client.request(EchoRequest(text=t)) for t in texts))
        assert [a.text for a in answers] == texts
    finally:
        await client.stop()


async def test_a_client_that_falls_behind_loses_no_response(bus: PulsarBus, served_flow: str) -> None:
    """A process whose Python is busy reads its responses late. The broker must hold them until it
    reads (a non-persistent response topic dropped 25-30 % of such a burst: each a 30 s timeout)."""
    client = echo_client(bus, served_flow, timeout_s=20)
    big = "x" * 17_000  # a graph-rag answer's size
    try:
        await client.request(EchoRequest(text="warm"))

        def requests_in() -> int:
            return int(topic_stats(topic(SERVICE, served_flow)).get("msgInCounter", 0))

        before = requests_in()
        asked = [asyncio.create_task(client.request(EchoRequest(text=f"{i}:{big}"))) for i in range(400)]
        await wait_until(lambda: requests_in() >= before + 400, 30, "the burst sent", interval_s=0.02)
        time.sleep(4)  # noqa: ASYNC251 - the point: this process reads nothing while the answers arrive
        answers = await asyncio.gather(*asked)
    finally:
        await client.stop()
    assert [a.text.split(":", 1)[0] for a in answers] == [str(i) for i in range(400)]


async def test_streaming_responses(bus: PulsarBus, served_flow: str) -> None:
    client = echo_client(bus, served_flow)
    try:
        parts = [r async for r in client.stream(EchoRequest(text="s", mode="stream", count=5))]
    finally:
        await client.stop()
    assert [p.text for p in parts] == [f"s-{i}" for i in range(5)]
    assert [p.end_of_stream for p in parts] == [False] * 4 + [True]
    assert len({p.pid for p in parts}) == 1


async def test_malformed_request_gets_error_and_processor_keeps_serving(bus: PulsarBus, served_flow: str) -> None:
    responses = await bus.reader(topic(SERVICE, served_flow, "response"))
    producer = await bus.producer(topic(SERVICE, served_flow))
    try:
        bad = {"bad-json": b"{not json", "bad-shape": b'{"mode": "echo"}', "extra": b'{"text": "x", "nope": 1}'}
        for rid, data in bad.items():
            await producer.send(data, {"id": rid})
        got: dict[str, EchoResponse] = {}
        while len(got) < len(bad):
            msg = await asyncio.wait_for(responses.receive(), 30)
            rid = msg.properties.get("id", "")
            if rid in bad:
                got[rid] = EchoResponse.model_validate_json(msg.data)
        for rid, res in got.items():
            assert res.error is not None and res.error.type == "bad-request", (rid, res)
            assert res.end_of_stream
    finally:
        await responses.close()
        await producer.close()
    client = echo_client(bus, served_flow)
    try:
        assert (await client.request(EchoRequest(text="still here"))).text == "still here"
    finally:
        await client.stop()


async def test_shared_subscription_balances_across_processes(bus: PulsarBus, procs: Procs, servers: Any) -> None:
    flow_id = new_flow()
    workers = [procs.echo_worker(f"echo-{i}", servers.pulsar_url, "--flow", flow_id) for i in range(2)]
    for w in workers:
        await w.await_line("ready")
    client = echo_client(bus, flow_id)
    try:
        pids: list[int] = []
        for batch in range(6):
            answers = await asyncio.gather(*(client.request(EchoRequest(text=f"{batch}-{i}")) for i in range(8)))
            pids += [a.pid for a in answers]
    finally:
        await client.stop()
    assert set(pids) == {w.pid for w in workers}, pids
    assert len(pids) == 48


async def test_request_survives_processor_killed_mid_request(
    bus: PulsarBus,
    procs: Procs,
    servers: Any,
    tmp_path: Path,
) -> None:
    flow_id = new_flow()
    workers = {
        w.pid: w for w in (procs.echo_worker(f"echo-{i}", servers.pulsar_url, "--flow", flow_id) for i in range(2))
    }
    for w in workers.values():
        await w.await_line("ready")
    marker = tmp_path / "marker"
    marker.mkdir()
    client = echo_client(bus, flow_id, timeout_s=60)
    try:
        pending = asyncio.create_task(
            client.request(EchoRequest(text="precious", mode="hang-first", marker_dir=str(marker)))
        )
        await wait_until(lambda: any(marker.iterdir()), 30, "a processor to take the request")
        victim = int(next(marker.iterdir()).name)
        assert victim in workers
        assert not pending.done()  # the request is in flight in the victim
        workers[victim].signal(signal.SIGKILL)
        res = await pending
    finally:
        await client.stop()
    assert workers[victim].popen.wait(10) == -signal.SIGKILL
    (survivor,) = set(workers) - {victim}
    assert res.text == "precious" and res.pid == survivor


async def test_dead_letter_after_redelivery_limit(bus: PulsarBus, procs: Procs, servers: Any) -> None:
    flow_id = new_flow()
    worker = procs.echo_worker("echo", servers.pulsar_url, "--flow", flow_id, "--max-redeliveries", "2")
    await worker.await_line("ready")
    client = echo_client(bus, flow_id)
    try:
        with pytest.raises(RemoteError) as err:
            await client.request(EchoRequest(text="poison", mode="boom"))
        assert err.value.type == "internal-error" and "unexpected failure" in err.value.message
        # The dead letter is retained on `<topic>-DLQ` (its subscription exists from the first
        # dead letter on) for an operator, who reads it later.
        dlq_topic = dead_letter(topic(SERVICE, flow_id))
        await wait_until(lambda: dead_letter_backlog(dlq_topic) == 1, 30, "the dead letter")
        dlq = await bus.consumer(dlq_topic, DEAD_LETTER_SUBSCRIPTION, max_redeliveries=0, prefetch=16)
        dead = await asyncio.wait_for(dlq.receive(), 30)
        await dlq.ack(dead)
    finally:
        await client.stop()
    assert EchoRequest.model_validate_json(dead.data).text == "poison"
    # First delivery plus two redeliveries, each failing in the handler.
    assert sum("request failed" in line for line in worker.lines("err")) == 3
    # The processor is still serving after the poison message left.
    client = echo_client(bus, flow_id)
    try:
        assert (await client.request(EchoRequest(text="after"))).text == "after"
    finally:
        await client.stop()


def dead_letter_backlog(dlq_topic: str) -> int:
    """Messages waiting on the dead-letter subscription of `dlq_topic`."""
    sub = topic_stats(dlq_topic).get("subscriptions", {}).get(DEAD_LETTER_SUBSCRIPTION, {})
    return int(sub.get("msgBacklog", 0))


@contextlib.asynccontextmanager
async def config_service(bus: PulsarBus) -> AsyncIterator[ConfigService]:
    """A flow registry served over Pulsar from the test process."""
    svc = ConfigService(bus, FlowRegistry(None))
    await svc.start()
    try:
        yield svc
    finally:
        await svc.stop()


async def test_flows_started_at_run_time_reach_other_processes(bus: PulsarBus, procs: Procs, servers: Any) -> None:
    flow_id = new_flow()
    blueprint = Blueprint(name=f"echo-{flow_id}", processors={SERVICE: ProcessorBinding()})
    async with config_service(bus):
        workers = [procs.echo_worker(f"echo-{i}", servers.pulsar_url, "--follow-config") for i in range(2)]
        for w in workers:
            await w.await_line("ready")
        assert not any(f"flow-started {flow_id}" in ln for w in workers for ln in w.lines())
        cfg = config_client(bus, timeout_s=30)
        client = echo_client(bus, flow_id)
        request_topic = topic(SERVICE, flow_id)
        try:
            await cfg.request(FlowRequest(operation="put-blueprint", blueprint=blueprint))
            await cfg.request(FlowRequest(operation="start-flow", flow_id=flow_id, blueprint_name=blueprint.name))
            for w in workers:
                await w.await_line(f"flow-started {flow_id}", 30)
            assert consumer_count(request_topic, SERVICE) == 2
            answers = await asyncio.gather(*(client.request(EchoRequest(text=str(i))) for i in range(8)))
            assert [a.text for a in answers] == [str(i) for i in range(8)]
            assert {a.pid for a in answers} <= {w.pid for w in workers}

            await cfg.request(FlowRequest(operation="stop-flow", flow_id=flow_id))
            for w in workers:
                await w.await_line(f"flow-stopped {flow_id}", 30)
            await wait_until(lambda: consumer_count(request_topic, SERVICE) == 0, 30, "consumers to leave")
            assert all(w.popen.poll() is None for w in workers)  # processors keep running
            await cfg.request(FlowRequest(operation="delete-blueprint", blueprint_name=blueprint.name))
        finally:
            await client.stop()
            await cfg.stop()
