"""The message bus interface and its in-process (memory) backend."""

from __future__ import annotations

import asyncio
import itertools
import logging
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import BaseModel

from schemas.topics import dead_letter

log = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)


@dataclass
class BusMessage:
    """A message as a consumer receives it."""

    data: bytes
    properties: dict[str, str]
    redelivery_count: int = 0
    handle: object = None  # backend-specific token used for ack/nack


class Producer(ABC):
    """Publishes to one topic."""

    @abstractmethod
    async def send(self, data: bytes, properties: dict[str, str]) -> None:
        """Publish one message; returns once the bus has it."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release the producer."""


class Consumer(ABC):
    """Receives from one subscription of one topic."""

    @abstractmethod
    async def receive(self) -> BusMessage:
        """Wait for the next message."""

    @abstractmethod
    async def ack(self, msg: BusMessage) -> None:
        """The message is done with: never deliver it again."""

    @abstractmethod
    async def nack(self, msg: BusMessage) -> None:
        """The message failed: redeliver it (possibly to another consumer) or dead-letter it."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Stop receiving; unacked messages go back to the subscription."""


class Bus(ABC):
    """A pub/sub bus with durable shared subscriptions and non-durable readers."""

    @abstractmethod
    async def producer(self, topic: str) -> Producer:
        """A producer for `topic`."""

    @abstractmethod
    async def consumer(self, topic: str, subscription: str, *, max_redeliveries: int, prefetch: int) -> Consumer:
        """A consumer on a Shared subscription: messages are spread over its consumers."""

    @abstractmethod
    async def reader(self, topic: str) -> Consumer:
        """A non-durable reader of messages published from now on (ack/nack are no-ops)."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Close every producer and consumer."""


@dataclass
class _Subscription:
    max_redeliveries: int  # readers never redeliver: 0
    queue: asyncio.Queue[BusMessage] = field(default_factory=asyncio.Queue)


class MemoryBus(Bus):
    """In-process bus for the embedded default and unit tests.

    Shared subscriptions are queues; readers get their own queue. Messages sent to a
    topic with no subscription wait in a backlog for the first one, as a persistent
    Pulsar topic would keep them for a subscription created before the send.
    """

    def __init__(self) -> None:
        self._subs: dict[str, dict[str, _Subscription]] = defaultdict(dict)
        self._backlog: dict[str, list[BusMessage]] = defaultdict(list)
        self._reader_ids = itertools.count()

    async def producer(self, topic: str) -> Producer:
        return _MemoryProducer(self, topic)

    def _publish(self, topic: str, msg: BusMessage) -> None:
        subs = self._subs.get(topic)
        if not subs:
            self._backlog[topic].append(msg)
            return
        for sub in subs.values():
            sub.queue.put_nowait(BusMessage(msg.data, dict(msg.properties)))

    async def consumer(self, topic: str, subscription: str, *, max_redeliveries: int, prefetch: int) -> Consumer:
        sub = self._subs[topic].get(subscription)
        if sub is None:
            sub = _Subscription(max_redeliveries=max_redeliveries)
            self._subs[topic][subscription] = sub
            for msg in self._backlog.pop(topic, []):
                sub.queue.put_nowait(msg)
        return _MemoryConsumer(self, topic, sub)

    async def reader(self, topic: str) -> Consumer:
        sub = _Subscription(max_redeliveries=0)
        name = f"reader-{next(self._reader_ids)}"
        self._subs[topic][name] = sub
        return _MemoryReader(self, topic, name, sub)


class _MemoryProducer(Producer):
    def __init__(self, bus: MemoryBus, topic: str) -> None:
        self._bus, self._topic = bus, topic

    async def send(self, data: bytes, properties: dict[str, str]) -> None:
        self._bus._publish(self._topic, BusMessage(data, dict(properties)))


class _MemoryConsumer(Consumer):
    def __init__(self, bus: MemoryBus, topic: str, sub: _Subscription) -> None:
        self._bus, self._topic, self._sub = bus, topic, sub

    async def receive(self) -> BusMessage:
        return await self._sub.queue.get()

    async def ack(self, msg: BusMessage) -> None:
        return None

    async def nack(self, msg: BusMessage) -> None:
        again = BusMessage(msg.data, msg.properties, msg.redelivery_count + 1)
        if again.redelivery_count > self._sub.max_redeliveries:
            self._bus._publish(dead_letter(self._topic), again)
        else:
            self._sub.queue.put_nowait(again)


class _MemoryReader(_MemoryConsumer):
    def __init__(self, bus: MemoryBus, topic: str, name: str, sub: _Subscription) -> None:
        super().__init__(bus, topic, sub)
        self._name = name

    async def nack(self, msg: BusMessage) -> None:
        return None

    async def close(self) -> None:
        self._bus._subs[self._topic].pop(self._name, None)


async def follow(reader: Consumer, model: type[M], handle: Callable[[M], Awaitable[None]], what: str) -> None:
    """Read `reader` for good, handing each message, parsed as `model`, to `handle`: a notice that
    does not parse is logged and skipped (one bad publisher must not stop the follower)."""
    while True:
        msg = await reader.receive()
        try:
            item = model.model_validate_json(msg.data)
        except ValueError:
            log.warning("malformed %s ignored", what)
            continue
        await handle(item)
