"""What every retrieval service's algorithm shares: the tenant a request reads, how a model's
tokens are counted, model usage, per-stage timing, a request's time budget. Bus-free."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from processors.base.errors import QueryTimeout
from schemas.scope import Scope

T = TypeVar("T")

NO_DATA = "Nothing in this collection (or scope) matches the question."


@dataclass(frozen=True)
class Tenant:
    """User + collection (every store call carries them), and the request's narrower scope."""

    user: str
    collection: str
    scope: Scope | None = None


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
    """Per-stage wall times of one request."""

    def __init__(self) -> None:
        self.stage_ms: dict[str, float] = {}
        self._t = time.perf_counter()

    def lap(self, stage: str) -> None:
        """Close `stage` (time since the previous lap)."""
        now = time.perf_counter()
        self.stage_ms[stage] = round(self.stage_ms.get(stage, 0.0) + (now - self._t) * 1000, 3)
        self._t = now
