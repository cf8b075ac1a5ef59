"""What every retrieval service's algorithm shares: the tenant a request reads, how a model's
tokens are counted, model usage, per-stage timing, a request's time budget. Bus-free."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from processors.accounting import usage
from processors.base.errors import QueryTimeout
from schemas.documents import Chunk, SearchMode
from schemas.retrieval import RequestCost
from schemas.tenant import Tenant

T = TypeVar("T")

NO_DATA = "Nothing in this collection (or scope) matches the question."


class ChunkSearchSource(Protocol):
    """The chunk search every document retrieval service (lazy-rag, kg-query, drift) shares."""

    async def search_chunks(
        self,
        t: Tenant,
        vector: list[float],
        text: str | None,
        limit: int,
        mode: SearchMode = "fused",
        communities: Sequence[str] | None = None,
    ) -> list[Chunk]:
        """The best chunks by vector + text, fused, or ranked by graphrank (`mode`); only those of
        `communities` when given; in scope."""
        ...


class TokenCounter(Protocol):
    """Counts tokens as the flow's model does (`name`: its tokenizer); `prompt_budget` is what a
    prompt, system included, may take."""

    name: str

    @property
    def prompt_budget(self) -> int: ...

    def __call__(self, text: str) -> int: ...


async def within(seconds: float, service: str, work: Awaitable[T]) -> T:
    """`work`'s result, or a `QueryTimeout` naming `service` once it has taken `seconds` (the
    request's whole time budget; what was found so far is discarded)."""
    try:
        async with asyncio.timeout(seconds):
            return await work
    except TimeoutError:
        raise QueryTimeout(f"{service} exceeded {seconds}s; partial results discarded") from None


@dataclass
class Usage:
    """Model calls another service made for a request (e.g. community summaries), and their tokens."""

    calls: int = 0
    in_token: int = 0
    out_token: int = 0


class Stopwatch:
    """Per-stage wall times of one request, and what each stage cost the stores (from the
    request's counter, `processors.accounting.usage`: its own store calls and those its calls to
    other services reported)."""

    def __init__(self) -> None:
        self.stage_ms: dict[str, float] = {}
        self.stage_store_requests: dict[str, int] = {}
        self.stage_store_round_trips: dict[str, int] = {}
        self._t = time.perf_counter()
        self._usage = usage.current()
        self._mark = self._usage.copy() if self._usage is not None else None

    def lap(self, stage: str) -> None:
        """Close `stage` (time and store usage since the previous lap)."""
        now = time.perf_counter()
        self.stage_ms[stage] = round(self.stage_ms.get(stage, 0.0) + (now - self._t) * 1000, 3)
        self._t = now
        if self._usage is not None and self._mark is not None:
            spent = self._usage.since(self._mark)
            self._mark = self._usage.copy()
            self.stage_store_requests[stage] = self.stage_store_requests.get(stage, 0) + spent.requests
            self.stage_store_round_trips[stage] = self.stage_store_round_trips.get(stage, 0) + spent.round_trips

    def report(self, stats: RequestCost) -> None:
        """Put the stages' times and store usage into `stats`, with the request's store totals so far."""
        stats.stage_ms = {**stats.stage_ms, **self.stage_ms}
        stats.stage_store_requests = {**stats.stage_store_requests, **self.stage_store_requests}
        stats.stage_store_round_trips = {**stats.stage_store_round_trips, **self.stage_store_round_trips}
        if self._usage is not None:
            stats.store_requests, stats.store_round_trips = self._usage.requests, self._usage.round_trips
