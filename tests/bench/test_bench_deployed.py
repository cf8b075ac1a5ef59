"""The deployed-path benchmark's own machinery: request counting, server reuse."""

from __future__ import annotations

import socket

import pytest

from bench.graph.bus import WARMUP, CountingBus, echo_latencies
from bench.graph.measure import Run
from bench.harness.servers import servers_for
from processors.base.bus import MemoryBus


async def test_counting_bus_counts_requests_not_responses() -> None:
    bus = CountingBus(MemoryBus())
    ms, rps = await echo_latencies(bus, 12, concurrency=4)
    assert len(ms) == 12 and rps > 0
    assert bus.requests == 12 + WARMUP  # each request once; its response is not counted


def test_a_server_that_answers_is_reused_not_started(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        monkeypatch.setenv("KGFLOW_PULSAR_PORT", str(listener.getsockname()[1]))
        with servers_for(["pulsar"], log=lambda _msg: None) as srv:
            assert srv.ready == {"pulsar"} and srv.started == []
            assert srv.why_not("pulsar") == ""
            assert "cassandra" in srv.why_not("cassandra")


def test_merged_runs_keep_every_request() -> None:
    a, b = Run(ms=[1.0, 2.0], per_trip_ms=[0.5]), Run(ms=[3.0], per_trip_ms=[0.7], hits=2)
    a.stage_ms["embed"] = [1.0]
    b.stage_ms["embed"] = [2.0]
    m = Run.merged([a, b])
    assert m.ms == [1.0, 2.0, 3.0] and m.hits == 2 and m.stage_ms["embed"] == [1.0, 2.0]
    assert m.summary()["store_ms_per_round_trip_p50"] == 0.7
