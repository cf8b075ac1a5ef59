"""One job per key at a time, requests coalesced (pure asyncio, no bus).

A community build reads and rewrites a whole collection's communities: two at once of one
collection would race, and a burst of requests (several loads ending, a retry) would rebuild it
once each. Here a request that arrives while its key's job runs waits for one next run, shared
with every request that arrives before that run starts: N requests in a burst cost at most two
runs, and the second sees every write made before it started.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class Coalescer(Generic[T]):
    """Runs jobs by key: one at a time per key, each queued run shared (see the module docstring)."""

    def __init__(self) -> None:
        self._locks: dict[Hashable, asyncio.Lock] = {}
        self._queued: dict[Hashable, asyncio.Task[T]] = {}

    async def run(self, key: Hashable, job: Callable[[], Awaitable[T]], kind: Hashable = None) -> T:
        """The result of the next run of `key` (of this `kind` of job: only requests of one kind
        share a run, while runs of every kind take turns per key) that starts after this call (a
        caller that goes away does not stop the run the others wait for)."""
        queued = (key, kind)
        task = self._queued.get(queued)
        if task is None:
            task = asyncio.ensure_future(self._turn(key, queued, job))
            self._queued[queued] = task
        return await asyncio.shield(task)

    async def _turn(self, key: Hashable, queued: Hashable, job: Callable[[], Awaitable[T]]) -> T:
        async with self._locks.setdefault(key, asyncio.Lock()):
            if self._queued.get(queued) is asyncio.current_task():
                del self._queued[queued]  # from now on a request waits for the run after this one
            return await job()
