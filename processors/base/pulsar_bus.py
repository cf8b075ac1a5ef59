"""Pulsar bus backend: Shared subscriptions with dead-letter topics on request topics; responses
read by non-durable readers (see `schemas.topics.topic`).

Everything goes through the client's asyncio API (`pulsar.asyncio`): a receive, send or ack is a
C++ call whose completion the client's I/O thread hands to the event loop with one
`call_soon_threadsafe`. No receive thread, no polling, no thread→loop queue: a message reaches
its handler with one thread handoff. Back-pressure is the consumer's receiver queue (`prefetch`):
the client asks the broker for more only as the processor takes messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import pulsar
import pulsar.asyncio as apulsar

from processors.base.bus import Bus, BusMessage, Consumer, Producer
from schemas.topics import dead_letter

log = logging.getLogger(__name__)

# Created on each dead-letter topic with its first message, so dead letters are retained
# (a topic without subscriptions keeps nothing) until an operator reads them.
DEAD_LETTER_SUBSCRIPTION = "dead-letters"
# A reader sees every message of its topic (a response topic: the answers to every client of the
# service), so readers get a deep receiver queue; they are drained by one task each, which only
# parses and hands over.
READER_QUEUE = 5000
RECEIVE_RETRY_S = 0.5  # after a failed receive (the client reconnects by itself; this is a backstop)


class PulsarBus(Bus):
    """Bus on a real Pulsar cluster (`pulsar://host:6650`)."""

    def __init__(self, url: str, *, nack_delay_ms: int = 1000) -> None:
        self._client = apulsar.Client(url, operation_timeout_seconds=30, logger=_quiet_logger())
        self._nack_delay_ms = nack_delay_ms
        self._closables: list[Producer | Consumer] = []

    async def producer(self, topic: str) -> Producer:
        p = await self._client.create_producer(topic, block_if_queue_full=True, batching_enabled=False)
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
        c = await self._client.subscribe(
            topic,
            subscription,
            consumer_type=pulsar.ConsumerType.Shared,
            initial_position=pulsar.InitialPosition.Earliest,
            receiver_queue_size=max(1, prefetch),
            negative_ack_redelivery_delay_ms=self._nack_delay_ms,
            dead_letter_policy=policy,
        )
        cons = _PulsarConsumer(c.receive, c)
        self._closables.append(cons)
        return cons

    async def reader(self, topic: str) -> Consumer:
        r = await self._client.create_reader(topic, pulsar.MessageId.latest, receiver_queue_size=READER_QUEUE)
        cons = _PulsarConsumer(r.read_next, r)
        self._closables.append(cons)
        return cons

    async def close(self) -> None:
        closables, self._closables = self._closables, []
        for c in closables:
            await c.close()  # idempotent: some were closed by their owners already
        with contextlib.suppress(Exception):  # already closed
            await self._client.close()


class _PulsarProducer(Producer):
    def __init__(self, producer: apulsar.Producer) -> None:
        self._p = producer
        self._closed = False

    async def send(self, data: bytes, properties: dict[str, str]) -> None:
        await self._p.send(data, properties)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):  # the client may be closed already
            await self._p.close()


class _PulsarConsumer(Consumer):
    """A consumer (or reader) whose `receive` survives cancellation: a receive the client has
    already been asked for is kept and handed to the next `receive`, so a cancelled wait (a
    timeout, a stopping task) never swallows a message."""

    def __init__(
        self,
        next_message: Callable[[], Awaitable[pulsar.Message]],
        handle: apulsar.Consumer | apulsar.Reader,
    ) -> None:
        self._next = next_message
        self._c = handle
        self._pending: asyncio.Future[pulsar.Message] | None = None
        self._closed = False

    async def receive(self) -> BusMessage:
        while True:
            pending = self._pending
            if pending is None:
                pending = self._pending = asyncio.ensure_future(self._next())
            try:
                msg = await asyncio.shield(pending)
            except apulsar.PulsarException:
                if self._closed:
                    raise
                log.warning("pulsar receive failed; retrying", exc_info=True)
                self._pending = None
                await asyncio.sleep(RECEIVE_RETRY_S)
                continue
            self._pending = None
            return BusMessage(msg.data(), msg.properties(), msg.redelivery_count(), handle=msg)

    async def ack(self, msg: BusMessage) -> None:
        if isinstance(self._c, apulsar.Consumer) and isinstance(msg.handle, pulsar.Message):  # a reader acks nothing
            await self._c.acknowledge(msg.handle)

    async def nack(self, msg: BusMessage) -> None:
        if isinstance(self._c, apulsar.Consumer) and isinstance(msg.handle, pulsar.Message):
            await self._c.negative_acknowledge(msg.handle)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        pending, self._pending = self._pending, None
        with contextlib.suppress(Exception):  # already closed, or the client with it
            await self._c.close()
        if pending is not None:  # fails (or was answered) once the handle is closed: unacked, redelivered
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending


def _quiet_logger() -> pulsar.ConsoleLogger:
    # The C++ client's own console logger: a Python logger would be called from the client's
    # threads (taking the GIL) and, at interpreter exit, falls back to printing DEBUG lines.
    return pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)
