"""Pulsar bus backend: persistent topics, Shared subscriptions, dead-letter topics.

The pulsar client is blocking, so each consumer has a receive thread that hands
messages to the event loop through a bounded queue (back-pressure: the thread waits
while the processor is busy). Sends use the client's async send with a callback.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

import pulsar

from processors.base.bus import Bus, BusMessage, Consumer, Producer
from schemas.topics import dead_letter

_RECEIVE_POLL_MS = 200
# Created on each dead-letter topic with its first message, so dead letters are retained
# (a topic without subscriptions keeps nothing) until an operator reads them.
DEAD_LETTER_SUBSCRIPTION = "dead-letters"


class PulsarBus(Bus):
    """Bus on a real Pulsar cluster (`pulsar://host:6650`)."""

    def __init__(self, url: str, *, nack_delay_ms: int = 1000) -> None:
        self._client = pulsar.Client(url, operation_timeout_seconds=30, logger=_quiet_logger())
        self._nack_delay_ms = nack_delay_ms
        self._closables: list[Producer | Consumer] = []

    async def producer(self, topic: str) -> Producer:
        p = await asyncio.to_thread(
            self._client.create_producer, topic, block_if_queue_full=True, batching_enabled=False
        )
        prod = _PulsarProducer(p)
        self._closables.append(prod)
        return prod

    async def consumer(self, topic: str, subscription: str, *, max_redeliveries: int, prefetch: int) -> Consumer:
        policy = None  # pulsar-client >= 3.13 refuses a policy of 0 redeliveries (e.g. a DLQ's own reader)
        if max_redeliveries > 0:
            policy = pulsar.ConsumerDeadLetterPolicy(
                max_redeliver_count=max_redeliveries,
                dead_letter_topic=dead_letter(topic),
                initial_subscription_name=DEAD_LETTER_SUBSCRIPTION,
            )
        c = await asyncio.to_thread(
            self._client.subscribe,
            topic,
            subscription,
            consumer_type=pulsar.ConsumerType.Shared,
            initial_position=pulsar.InitialPosition.Earliest,
            receiver_queue_size=max(1, prefetch),
            negative_ack_redelivery_delay_ms=self._nack_delay_ms,
            dead_letter_policy=policy,
        )
        cons = _PulsarConsumer(c, prefetch)
        self._closables.append(cons)
        return cons

    async def reader(self, topic: str) -> Consumer:
        r = await asyncio.to_thread(self._client.create_reader, topic, pulsar.MessageId.latest)
        cons = _PulsarConsumer(r, 256, is_reader=True)
        self._closables.append(cons)
        return cons

    async def close(self) -> None:
        closables, self._closables = self._closables, []
        for c in closables:
            await c.close()  # idempotent: some were closed by their owners already
        await asyncio.to_thread(self._client.close)


class _PulsarProducer(Producer):
    def __init__(self, producer: Any) -> None:
        self._p = producer
        self._closed = False

    async def send(self, data: bytes, properties: dict[str, str]) -> None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def callback(res: pulsar.Result, _msg_id: Any) -> None:
            def settle() -> None:
                if done.done():
                    return
                if res == pulsar.Result.Ok:
                    done.set_result(None)
                else:
                    done.set_exception(RuntimeError(f"pulsar send failed: {res}"))

            loop.call_soon_threadsafe(settle)

        self._p.send_async(data, callback, properties=properties)
        await done

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):  # the client may be closed already
            await asyncio.to_thread(self._p.close)


class _PulsarConsumer(Consumer):
    def __init__(self, consumer: Any, capacity: int, *, is_reader: bool = False) -> None:
        self._c = consumer
        self._is_reader = is_reader
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[BusMessage] = asyncio.Queue(maxsize=max(1, capacity))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._pump, daemon=True, name="pulsar-receive")
        self._thread.start()

    def _pump(self) -> None:
        while not self._stop.is_set():
            try:
                if self._is_reader:
                    msg = self._c.read_next(_RECEIVE_POLL_MS)
                else:
                    msg = self._c.receive(_RECEIVE_POLL_MS)
            except pulsar.Timeout:
                continue
            except Exception:  # client closed under us
                if self._stop.is_set():
                    return
                self._stop.wait(0.5)
                continue
            item = BusMessage(msg.data(), dict(msg.properties()), msg.redelivery_count(), handle=msg)
            fut = asyncio.run_coroutine_threadsafe(self._queue.put(item), self._loop)
            try:
                fut.result()
            except Exception:
                return

    async def receive(self) -> BusMessage:
        return await self._queue.get()

    async def ack(self, msg: BusMessage) -> None:
        if not self._is_reader:
            self._c.acknowledge(msg.handle)

    async def nack(self, msg: BusMessage) -> None:
        if not self._is_reader:
            self._c.negative_acknowledge(msg.handle)

    async def close(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        await asyncio.to_thread(self._thread.join, 2.0)
        with contextlib.suppress(Exception):  # already closed
            await asyncio.to_thread(self._c.close)


def _quiet_logger() -> Any:
    # The C++ client's own console logger: a Python logger would be called from the client's
    # threads (taking the GIL) and, at interpreter exit, falls back to printing DEBUG lines.
    return pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)
