"""The processor framework over the memory bus: request/response, streaming, timeouts,
concurrency, malformed input, dead letters, cancellation when the client goes away."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from prometheus_client import REGISTRY

from processors.accounting.usage import StoreUsage, count, counting, current
from processors.base.bus import MemoryBus
from processors.base.client import RemoteError, RequestResponseClient, RequestTimeout
from processors.base.errors import BadRequest
from processors.base.processor import FlowContext, FlowProcessor, ServiceSpec
from processors.base.settings import RuntimeSettings
from schemas.base import Message, Response
from schemas.services import Service
from schemas.topics import dead_letter, topic


class EchoRequest(Message):
    text: str
    delay: float = 0.0
    pieces: int = 0
    fail: str | None = None
    store: int = 0  # store requests the handler makes (one store call), and each streamed piece


class EchoResponse(Response):
    text: str = ""


ECHO = Service("echo", EchoRequest, EchoResponse)
ECHO_STREAM = Service("echo-stream", EchoRequest, EchoResponse)


class Echo(FlowProcessor):
    name = "echo"

    def __init__(self, bus: MemoryBus, runtime: RuntimeSettings | None = None) -> None:
        super().__init__(bus, runtime)
        self.active = 0
        self.peak = 0
        self.crashes = 0
        self.started = 0

    def services(self) -> list[ServiceSpec]:
        return [
            ServiceSpec(ECHO, self.echo),
            ServiceSpec(ECHO_STREAM, self.echo_stream),
        ]

    async def echo(self, req: EchoRequest, flow: FlowContext) -> EchoResponse:
        self.started += 1
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            await asyncio.sleep(req.delay)
            if req.store:
                count(current(), req.store, 1)  # as a store's connection layer counts what it sends
            if req.fail == "bad":
                raise BadRequest("text is not acceptable")
            if req.fail in ("crash", "value", "validation"):
                self.crashes += 1
                if req.fail == "value":  # a fault of ours, though of the type input checks raise
                    raise ValueError("an internal invariant broke")
                if req.fail == "validation":  # a model built from our own data failed to validate
                    EchoRequest.model_validate({})
                raise RuntimeError("boom")
            return EchoResponse(text=f"{flow.id}:{req.text}")
        finally:
            self.active -= 1

    async def echo_stream(self, req: EchoRequest, flow: FlowContext) -> AsyncIterator[EchoResponse]:
        for i in range(req.pieces):
            await asyncio.sleep(req.delay)
            if req.store:
                count(current(), req.store, 1)
            yield EchoResponse(text=f"{req.text}{i}", end_of_stream=i == req.pieces - 1)


def client(bus: MemoryBus, service: str = "echo", flow: str = "f1", timeout: float = 5.0) -> RequestResponseClient:
    return RequestResponseClient(bus, topic(service, flow), topic(service, flow, "response"), EchoResponse, timeout)


@pytest.fixture
async def served() -> AsyncIterator[tuple[MemoryBus, Echo]]:
    bus = MemoryBus()
    proc = Echo(bus, RuntimeSettings(concurrency=4, max_redeliveries=2))
    await proc.start_flow("f1", {})
    yield bus, proc
    await proc.stop()


async def test_request_response_round_trip(served: tuple[MemoryBus, Echo]) -> None:
    bus, _ = served
    res = await client(bus).request(EchoRequest(text="hi"))
    assert res.text == "f1:hi" and res.error is None


async def test_what_a_request_cost_the_stores_comes_back_with_its_answer(served: tuple[MemoryBus, Echo]) -> None:
    bus, _ = served
    c = client(bus)

    async def ask(n: int) -> StoreUsage:
        with counting() as usage:  # the caller's counter: what its calls report is added to it
            await c.request(EchoRequest(text="x", store=n, delay=0.05))
        return usage

    assert await asyncio.gather(ask(3), ask(5)) == [StoreUsage(3, 1), StoreUsage(5, 1)]  # concurrent: never mixed
    with counting() as usage:  # each frame of a stream reports what was counted since the previous one
        assert len([r async for r in client(bus, "echo-stream").stream(EchoRequest(text="p", pieces=3, store=2))]) == 3
    assert usage == StoreUsage(6, 3)
    with counting() as usage, pytest.raises(RemoteError):  # an error answer reports its cost too
        await c.request(EchoRequest(text="x", store=4, fail="bad"))
    assert usage == StoreUsage(4, 1)
    with counting() as usage:
        await c.request(EchoRequest(text="free"))
    assert usage == StoreUsage(0, 0)


async def test_streaming_yields_every_piece_in_order(served: tuple[MemoryBus, Echo]) -> None:
    bus, _ = served
    got = [r.text async for r in client(bus, "echo-stream").stream(EchoRequest(text="p", pieces=4))]
    assert got == ["p0", "p1", "p2", "p3"]


async def test_a_stream_that_keeps_answering_outlives_the_clients_wait(served: tuple[MemoryBus, Echo]) -> None:
    bus, _ = served
    # a piece every 0.25 s for 2 s; the client waits at most 0.6 s for each next one
    req = EchoRequest(text="p", pieces=8, delay=0.25)
    got = [r.text async for r in client(bus, "echo-stream").stream(req, timeout_s=0.6)]
    assert got == [f"p{i}" for i in range(8)]


async def test_timeout_raises_and_later_requests_still_work(served: tuple[MemoryBus, Echo]) -> None:
    bus, _ = served
    c = client(bus)
    with pytest.raises(RequestTimeout):
        await c.request(EchoRequest(text="slow", delay=1.0), timeout_s=0.1)
    assert (await c.request(EchoRequest(text="fast"))).text == "f1:fast"


async def test_concurrency_is_bounded_but_parallel(served: tuple[MemoryBus, Echo]) -> None:
    bus, proc = served
    c = client(bus)
    results = await asyncio.gather(*[c.request(EchoRequest(text=str(i), delay=0.05)) for i in range(12)])
    assert sorted(r.text for r in results) == sorted(f"f1:{i}" for i in range(12))
    assert proc.peak == 4  # N in flight, not one at a time and not unbounded


async def test_responses_are_matched_to_their_requests(served: tuple[MemoryBus, Echo]) -> None:
    bus, _ = served
    a, b = client(bus), client(bus)
    ra, rb = await asyncio.gather(a.request(EchoRequest(text="a", delay=0.05)), b.request(EchoRequest(text="b")))
    assert (ra.text, rb.text) == ("f1:a", "f1:b")


async def test_malformed_message_gets_error_and_processor_keeps_serving(served: tuple[MemoryBus, Echo]) -> None:
    bus, _ = served
    c = client(bus)
    await c.start()
    prod = await bus.producer(topic("echo", "f1"))
    reader = await bus.reader(topic("echo", "f1", "response"))
    await prod.send(b"{not json", {"id": "m1"})
    await prod.send(b'{"txt": "x"}', {"id": "m2"})
    replies = {}
    for _ in range(2):
        msg = await asyncio.wait_for(reader.receive(), 5)
        replies[msg.properties["id"]] = EchoResponse.model_validate_json(msg.data)
    assert replies["m1"].error is not None and replies["m1"].error.type == "bad-request"
    assert "text" in replies["m2"].error.message  # names the missing field
    assert (await c.request(EchoRequest(text="still"))).text == "f1:still"


async def test_service_error_is_typed(served: tuple[MemoryBus, Echo]) -> None:
    bus, _ = served
    with pytest.raises(RemoteError) as e:
        await client(bus).request(EchoRequest(text="x", fail="bad"))
    assert e.value.type == "bad-request" and "not acceptable" in e.value.message


async def test_crash_is_retried_then_dead_lettered_with_error_response(served: tuple[MemoryBus, Echo]) -> None:
    bus, proc = served
    dlq = await bus.consumer(dead_letter(topic("echo", "f1")), "inspect", max_redeliveries=0, prefetch=16)
    with pytest.raises(RemoteError) as e:
        await client(bus).request(EchoRequest(text="x", fail="crash"))
    assert e.value.type == "internal-error"
    assert proc.crashes == 3  # first try + 2 redeliveries
    poison = await asyncio.wait_for(dlq.receive(), 5)
    assert EchoRequest.model_validate_json(poison.data).text == "x"


@pytest.mark.parametrize("fail", ["value", "validation"])
async def test_a_value_or_validation_error_inside_a_handler_is_internal_and_retried(
    served: tuple[MemoryBus, Echo], fail: str
) -> None:
    bus, proc = served
    before = REGISTRY.get_sample_value("kgflow_internal_errors_total", {"processor": "echo", "service": "echo"}) or 0
    with pytest.raises(RemoteError) as e:
        await client(bus).request(EchoRequest(text="x", fail=fail))
    assert e.value.type == "internal-error" and proc.crashes == 3  # not the client's fault: retried
    after = REGISTRY.get_sample_value("kgflow_internal_errors_total", {"processor": "echo", "service": "echo"})
    assert after == before + 3
    with pytest.raises(RemoteError) as e:  # a deliberate BadRequest is answered once, not retried
        await client(bus).request(EchoRequest(text="x", fail="bad"))
    assert e.value.type == "bad-request" and proc.started == 4


async def test_unknown_flow_times_out_with_clear_message(served: tuple[MemoryBus, Echo]) -> None:
    bus, _ = served
    with pytest.raises(RequestTimeout, match="echo:nosuchflow"):
        await client(bus, flow="nosuchflow").request(EchoRequest(text="x"), timeout_s=0.2)
    assert (await client(bus).request(EchoRequest(text="ok"))).text == "f1:ok"


async def until(cond, what: str) -> None:  # type: ignore[no-untyped-def]
    for _ in range(1000):
        if cond():
            return
        await asyncio.sleep(0.01)
    pytest.fail(f"never: {what}")


async def test_a_request_its_client_abandons_is_cancelled_at_the_service_and_not_redone(
    served: tuple[MemoryBus, Echo],
) -> None:
    bus, proc = served
    c = RequestResponseClient.for_service(bus, ECHO, "f1", 5.0)
    asking = asyncio.create_task(c.request(EchoRequest(text="long", delay=60)))
    await until(lambda: proc.active == 1, "the request runs")
    asking.cancel()
    await until(lambda: proc.active == 0, "the service stops working on it")
    assert (await c.request(EchoRequest(text="next"))).text == "f1:next"
    assert proc.started == 2  # acknowledged when cancelled: never redelivered
    await c.stop()


class SlowOpeningBus(MemoryBus):
    """A memory bus whose producers take a moment to open, as a broker's do."""

    def __init__(self) -> None:
        super().__init__()
        self.opened: list[str] = []

    async def producer(self, topic: str):  # type: ignore[no-untyped-def]
        self.opened.append(topic)
        await asyncio.sleep(0.01)
        return await super().producer(topic)


async def test_a_burst_of_first_answers_opens_one_response_producer() -> None:
    bus = SlowOpeningBus()
    proc = Echo(bus, RuntimeSettings(concurrency=16))
    await proc.start_flow("f1", {})
    try:
        c = client(bus)
        answers = await asyncio.gather(*(c.request(EchoRequest(text=str(i))) for i in range(16)))
    finally:
        await proc.stop()
    assert [a.text for a in answers] == [f"f1:{i}" for i in range(16)]
    assert bus.opened.count(topic("echo", "f1", "response")) == 1


async def test_the_answer_of_a_redelivered_request_that_had_less_to_say_is_not_taken_for_a_repeat() -> None:
    # A load's first attempt streamed 4 progress frames and died; the attempt that got it again
    # found the work done (stored by the first) and answers at once: its answer is frame 1.
    bus = MemoryBus()
    service = await bus.consumer(topic("echo", "f1"), "echo", max_redeliveries=2, prefetch=4)
    answers = await bus.producer(topic("echo", "f1", "response"))
    c = client(bus, timeout=2.0)

    async def serve() -> None:
        rid = (await service.receive()).properties["id"]
        for seq in range(4):  # the first attempt's progress
            step = EchoResponse(text=f"p{seq}", end_of_stream=False)
            await answers.send(step.model_dump_json().encode(), {"id": rid, "seq": str(seq)})
        for seq, res in enumerate([EchoResponse(text="again", end_of_stream=False), EchoResponse(text="done")]):
            await answers.send(res.model_dump_json().encode(), {"id": rid, "seq": str(seq)})

    serving = asyncio.create_task(serve())
    try:
        got = [r.text async for r in c.stream(EchoRequest(text="x"))]
    finally:
        await serving
        await c.stop()
    assert got == ["p0", "p1", "p2", "p3", "done"]  # the repeat of frame 0 dropped, the answer kept
