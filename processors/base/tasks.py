"""Small asyncio helpers the framework's background loops share."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol


class Closable(Protocol):
    """A bus endpoint (reader, consumer, producer)."""

    async def close(self) -> None: ...


async def cancel_and_wait(task: asyncio.Task[Any] | None) -> None:
    """Cancel `task` (if any) and wait until it has stopped. The caller's own cancellation is never
    swallowed: a loop stopped while it stops another (a config watcher stopping a flow) stops too."""
    if task is None:
        return
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise


async def cancel_and_close(task: asyncio.Task[Any] | None, *endpoints: Closable | None) -> None:
    """Cancel the loop `task`, wait until it has stopped, then close the endpoints it used."""
    await cancel_and_wait(task)
    for endpoint in endpoints:
        if endpoint is not None:
            await endpoint.close()
