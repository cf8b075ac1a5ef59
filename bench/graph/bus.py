"""What one request/response costs on the bus itself: an echo service (no work in the handler)
through the real FlowProcessor and RequestResponseClient, on the in-process bus and on Pulsar,
alternating in the same run; and the broker's own floor, the same round trip with the bare
pulsar client (blocking calls in threads, no kgflow code). Plus `CountingBus`, which counts the
requests a workload sends, so a graph-rag question's bus cost can be divided per round trip."""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from bench.harness.stats import percentile
from processors.base.bus import Bus, Consumer, MemoryBus, Producer
from processors.base.client import RequestResponseClient
from processors.base.processor import FlowContext, FlowProcessor, ServiceSpec
from processors.base.settings import RuntimeSettings
from schemas.base import Message, Response
from schemas.services import Service
from schemas.topics import topic

ECHO = "bench-echo"
WARMUP = 20


class EchoRequest(Message):
    """A payload the size of a small store request."""

    text: str


class EchoResponse(Response):
    """The payload back."""

    text: str = ""


class EchoProcessor(FlowProcessor):
    """Answers at once: what is measured is the bus and the framework around the handler."""

    name = ECHO

    def services(self) -> list[ServiceSpec]:
        return [ServiceSpec(Service(ECHO, EchoRequest, EchoResponse), self.echo)]

    async def echo(self, req: EchoRequest, flow: FlowContext) -> EchoResponse:
        return EchoResponse(text=req.text)


async def echo_latencies(bus: Bus, requests: int, concurrency: int = 1) -> tuple[list[float], float]:
    """Client-side latency (ms) of `requests` echo requests, and requests per second."""
    flow = f"bench-{uuid.uuid4().hex[:8]}"
    proc = EchoProcessor(bus, RuntimeSettings())
    await proc.start_flow(flow, {})
    client = RequestResponseClient(bus, topic(ECHO, flow), topic(ECHO, flow, "response"), EchoResponse, 30)
    payload = "x" * 300
    try:
        for _ in range(WARMUP):
            await client.request(EchoRequest(text=payload))
        slots = asyncio.Semaphore(concurrency)
        ms: list[float] = []

        async def one() -> None:
            async with slots:
                t = time.perf_counter()
                await client.request(EchoRequest(text=payload))
                ms.append((time.perf_counter() - t) * 1000)

        began = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(requests)))
        return ms, requests / (time.perf_counter() - began)
    finally:
        await client.stop()
        await proc.stop_flow(flow)


def broker_floor(url: str, requests: int) -> list[float]:
    """The same round trip with the bare pulsar client: a persistent request topic read by a Shared
    subscription (acked after answering), a response topic read by a reader."""
    import pulsar

    client = pulsar.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    flow = f"floor-{uuid.uuid4().hex[:8]}"
    req_t, res_t = topic(ECHO, flow), topic(ECHO, flow, "response")
    stop = threading.Event()
    try:
        cons = client.subscribe(req_t, ECHO, consumer_type=pulsar.ConsumerType.Shared, receiver_queue_size=16)
        answer = client.create_producer(res_t, batching_enabled=False)
        reader = client.create_reader(res_t, pulsar.MessageId.latest)
        ask = client.create_producer(req_t, batching_enabled=False)

        def serve() -> None:
            while not stop.is_set():
                try:
                    m = cons.receive(200)
                except pulsar.Timeout:
                    continue
                answer.send(m.data(), properties=m.properties())
                cons.acknowledge(m)

        server = threading.Thread(target=serve, daemon=True, name="floor-echo")
        server.start()
        ms: list[float] = []
        for i in range(requests + WARMUP):
            t = time.perf_counter()
            ask.send(b"x" * 300, properties={"id": str(i)})
            reader.read_next(30_000)
            if i >= WARMUP:
                ms.append((time.perf_counter() - t) * 1000)
        stop.set()
        server.join(2)
        return ms
    finally:
        client.close()


async def bench_bus(url: str, rounds: int, requests: int, log: Callable[[str], None]) -> dict[str, Any]:
    """Echo round trips, in-process and over Pulsar, alternating `rounds` times; the broker floor."""
    from processors.base.pulsar_bus import PulsarBus

    mem: list[float] = []
    pul: list[float] = []
    floor: list[float] = []
    rps: dict[str, list[float]] = {"memory_c8": [], "pulsar_c8": []}
    for r in range(rounds):
        log(f"[bench] bus round trip, round {r + 1}/{rounds}")
        ms, _ = await echo_latencies(MemoryBus(), requests)
        mem += ms
        _, rate = await echo_latencies(MemoryBus(), requests, concurrency=8)
        rps["memory_c8"].append(rate)
        bus = PulsarBus(url)
        try:
            ms, _ = await echo_latencies(bus, requests)
            pul += ms
            _, rate = await echo_latencies(bus, requests, concurrency=8)
            rps["pulsar_c8"].append(rate)
        finally:
            await bus.close()
        floor += await asyncio.to_thread(broker_floor, url, requests)
    overhead = percentile(pul, 50) - percentile(mem, 50)
    return {
        "what": "echo service, FlowProcessor + RequestResponseClient, sequential; memory and Pulsar alternate",
        "requests": len(pul),
        "in_process_p50_ms": round(percentile(mem, 50), 3),
        "pulsar_p50_ms": round(percentile(pul, 50), 3),
        "pulsar_p95_ms": round(percentile(pul, 95), 3),
        "pulsar_overhead_per_round_trip_p50_ms": round(overhead, 3),
        "broker_floor_p50_ms": round(percentile(floor, 50), 3),
        "broker_floor_p95_ms": round(percentile(floor, 95), 3),
        "broker_floor_what": "bare pulsar client, blocking calls: request (Shared subscription) + response (reader)",
        "throughput_rps_concurrency_8": {k: round(statistics.median(v), 1) for k, v in rps.items()},
    }


class CountingBus(Bus):
    """A bus that counts the requests sent through it (sends to any topic but a response topic)."""

    def __init__(self, inner: Bus) -> None:
        self.inner = inner
        self.requests = 0

    async def producer(self, topic: str) -> Producer:
        prod = await self.inner.producer(topic)
        return prod if "response" in topic.rsplit("/", 1)[-1] else _Counted(prod, self)

    async def consumer(self, topic: str, subscription: str, *, max_redeliveries: int, prefetch: int) -> Consumer:
        return await self.inner.consumer(topic, subscription, max_redeliveries=max_redeliveries, prefetch=prefetch)

    async def reader(self, topic: str) -> Consumer:
        return await self.inner.reader(topic)

    async def close(self) -> None:
        await self.inner.close()


class _Counted(Producer):
    def __init__(self, inner: Producer, bus: CountingBus) -> None:
        self.inner, self.bus = inner, bus

    async def send(self, data: bytes, properties: dict[str, str]) -> None:
        self.bus.requests += 1
        await self.inner.send(data, properties)

    async def close(self) -> None:
        await self.inner.close()
