"""`follow`: a notice topic's follower skips what does not parse and goes on with the next."""

from __future__ import annotations

import asyncio

from processors.base.bus import MemoryBus, follow
from processors.base.tasks import cancel_and_wait
from schemas.flows import GraphChanged


async def test_a_malformed_notice_is_skipped_and_the_next_handled() -> None:
    bus = MemoryBus()
    reader = await bus.reader("notices")
    seen: list[GraphChanged] = []

    async def handle(note: GraphChanged) -> None:
        seen.append(note)

    task = asyncio.create_task(follow(reader, GraphChanged, handle, "notice"))
    producer = await bus.producer("notices")
    await producer.send(b"not json", {})
    await producer.send(b'{"user": "alice"}', {})  # no collection: does not validate
    await producer.send(GraphChanged(user="alice", collection="c").model_dump_json().encode(), {})
    for _ in range(100):
        if seen:
            break
        await asyncio.sleep(0.01)
    await cancel_and_wait(task)
    await bus.close()
    assert [(n.user, n.collection) for n in seen] == [("alice", "c")]
