"""What every retrieval service's algorithm shares: the tenant a request reads, a model's answer,
per-stage timing. Bus-free."""

from __future__ import annotations

import time
from dataclasses import dataclass

from schemas.scope import Scope

NO_DATA = "Nothing in this collection (or scope) matches the question."


@dataclass(frozen=True)
class Tenant:
    """User + collection (every store call carries them), and the request's narrower scope."""

    user: str
    collection: str
    scope: Scope | None = None


@dataclass
class Completion:
    """A model's answer (`configured` False: no model is configured, the text says so)."""

    text: str
    configured: bool = True
    model: str = ""
    in_token: int = 0
    out_token: int = 0


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
