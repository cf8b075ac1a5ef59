"""Handlers on the real broker: a hung handler is abandoned, stopping drains in-flight requests,
and a stream redelivered after a crash reaches the client once (numbered frames)."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import pytest

from processors.base.client import RemoteError
from processors.base.pulsar_bus import PulsarBus
from schemas.topics import topic
from tests.integration.pulsar_helpers import Proc, Procs, topic_stats, wait_until
from tests.integration.test_pulsar_bus import bus, echo_client, new_flow, procs  # noqa: F401 - fixtures
from tests.integration.workers.echo import SERVICE, EchoRequest

pytestmark = pytest.mark.usefixtures("servers")


def backlog(flow_id: str) -> int:
    """Unacknowledged requests on the echo subscription of `flow_id`."""
    stats = topic_stats(topic(SERVICE, flow_id)).get("subscriptions", {}).get(SERVICE, {})
    return int(stats.get("msgBacklog", 0)) + int(stats.get("unackedMessages", 0))


async def serving(procs: Procs, servers: Any, *options: str) -> tuple[str, Proc]:  # noqa: F811
    """A new flow served by one echo worker (started with `options`), ready."""
    flow_id = new_flow()
    worker = procs.echo_worker("echo", servers.pulsar_url, "--flow", flow_id, *options)
    await worker.await_line("ready")
    return flow_id, worker


async def test_a_hung_handler_is_abandoned_with_an_error_and_acknowledged(
    bus: PulsarBus,  # noqa: F811
    procs: Procs,  # noqa: F811
    servers: Any,
) -> None:
    flow_id, worker = await serving(procs, servers, "--handler-timeout", "1.5")
    client = echo_client(bus, flow_id)
    try:
        with pytest.raises(RemoteError) as err:
            await client.request(EchoRequest(text="stuck", mode="hang"))
        assert err.value.type == "timeout" and "abandoned" in err.value.message
        await asyncio.sleep(2.0)  # a nacked request would come back within the nack delay (200 ms)
        assert sum("hanging" in line for line in worker.lines()) == 1
        await wait_until(lambda: backlog(flow_id) == 0, 30, "the request to be acknowledged")
        assert (await client.request(EchoRequest(text="next"))).text == "next"  # the processor serves on
    finally:
        await client.stop()


async def test_stopping_drains_in_flight_requests(
    bus: PulsarBus,  # noqa: F811
    procs: Procs,  # noqa: F811
    servers: Any,
) -> None:
    flow_id, worker = await serving(procs, servers)
    client = echo_client(bus, flow_id)
    try:
        pending = asyncio.create_task(client.request(EchoRequest(text="finish me", mode="slow", delay=2.0)))
        await worker.await_line("slow-started", 30)
        worker.signal(signal.SIGTERM)  # stop(): every flow is stopped, in-flight handlers drained
        res = await pending
        assert res.text == "finish me" and res.pid == worker.pid
    finally:
        await client.stop()
    assert worker.popen.wait(30) == 0
    assert backlog(flow_id) == 0  # answered and acknowledged, not left for redelivery


async def test_a_redelivered_stream_reaches_the_client_once(
    bus: PulsarBus,  # noqa: F811
    procs: Procs,  # noqa: F811
    servers: Any,
    tmp_path: Path,
) -> None:
    flow_id = new_flow()
    workers = {w.pid: w for w in (procs.echo_worker(f"echo-{i}", servers.pulsar_url, "--flow", flow_id)
                                  for i in range(2))}  # fmt: skip
    for w in workers.values():
        await w.await_line("ready")
    marker = tmp_path / "marker"
    marker.mkdir()
    client = echo_client(bus, flow_id, timeout_s=60)
    request = EchoRequest(text="s", mode="stream-hang-first", count=6, marker_dir=str(marker))
    try:
        received: list[Any] = []

        async def consume() -> None:
            async for part in client.stream(request):
                received.append(part)

        task = asyncio.create_task(consume())
        await wait_until(lambda: any(marker.iterdir()), 30, "a worker to take the request")
        victim = workers[int(next(marker.iterdir()).name)]
        await victim.await_line("streamed 3", 30)
        await wait_until(lambda: len(received) == 3, 30, "the first half of the stream")
        victim.signal(signal.SIGKILL)
        await asyncio.wait_for(task, 60)
    finally:
        await client.stop()
    assert [p.text for p in received] == [f"s-{i}" for i in range(6)]  # no piece twice, none missing
    assert [p.index for p in received] == list(range(6))
    assert received[-1].end_of_stream and received[-1].pid != victim.pid
