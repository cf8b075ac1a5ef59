"""cancel_and_wait: stopping a loop never swallows the stopper's own cancellation (a config
watcher cancelled while it stops a flow used to keep running, and `System.stop` hung)."""

from __future__ import annotations

import asyncio

import pytest

from processors.base.tasks import cancel_and_wait


async def test_a_task_cancelled_while_it_stops_another_is_cancelled_too() -> None:
    async def slow_to_stop() -> None:  # like a flow draining its requests
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            await asyncio.sleep(0.2)
            raise

    inner = asyncio.create_task(slow_to_stop())
    await asyncio.sleep(0)

    async def stopper() -> None:
        await cancel_and_wait(inner)
        await asyncio.sleep(3600)  # reached only if its own cancellation was swallowed

    outer = asyncio.create_task(stopper())
    await asyncio.sleep(0.05)  # inside cancel_and_wait
    outer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(outer, 5)
    assert inner.done()


async def test_the_stopped_task_s_cancellation_is_not_the_caller_s() -> None:
    task = asyncio.create_task(asyncio.sleep(3600))
    await asyncio.sleep(0)
    await cancel_and_wait(task)  # returns normally
    assert task.cancelled()
    await cancel_and_wait(None)
