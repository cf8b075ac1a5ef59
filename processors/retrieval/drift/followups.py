"""Which follow-ups a DRIFT search runs, in what order, and the model-call budget (bus-free).

Microsoft's DRIFT runs its follow-ups in random order; here they are ranked. A follow-up's
priority is `(1 - w) * confidence + w * novelty`:

- confidence: of what proposed it — for the primer's, how near its target communities are to the
  question (their search score); for a local answer's, that answer's confidence;
- novelty: 1 - the highest similarity to a follow-up already run or already picked for this
  pass, where similarity is the cosine of the two questions' vectors times the share of this
  one's target communities the other covered (the same question about another community is new).

Picking is greedy (each pick lowers the novelty of those like it) and ties go by question text,
so the same inputs always give the same order. A follow-up whose novelty is below `min_novelty`
repeats what is known and is dropped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class Pending:
    """A follow-up not run yet."""

    question: str
    targets: list[str]  # community ids to search (empty: the whole scope)
    depth: int
    confidence: float
    vector: list[float] = field(default_factory=list)


@dataclass
class Ranked:
    """A follow-up picked to run, with the priority it was picked by."""

    item: Pending
    priority: float


class Budget:
    """The model-call budget of one request: the model is called only after `take` said yes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    @property
    def left(self) -> int:
        """Calls still allowed."""
        return self.limit - self.used

    def take(self, n: int = 1) -> bool:
        """Reserve `n` calls if that many are left."""
        if n > self.left:
            return False
        self.used += n
        return True

    def give_back(self, n: int = 1) -> None:
        """Return reserved calls that were not made (no model configured, fewer summaries)."""
        self.used = max(0, self.used - n)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity (0 for an empty or zero vector)."""
    if not a or not b or len(a) != len(b):
        return 0.0
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


def overlap(targets: Sequence[str], covered: Sequence[str]) -> float:
    """The share of `targets` that `covered` searched too (a whole-scope search covers all)."""
    if not targets or not covered:
        return 1.0
    return len(set(targets) & set(covered)) / len(set(targets))


def similarity(a: Pending, b: Pending) -> float:
    """How far `b` already answers `a`: question similarity times target overlap."""
    return max(0.0, cosine(a.vector, b.vector)) * overlap(a.targets, b.targets)


def rank_followups(
    pending: Sequence[Pending], answered: Sequence[Pending], novelty_weight: float, min_novelty: float, limit: int
) -> list[Ranked]:
    """The best `limit` of `pending` in order (see the module docstring)."""
    seen = list(answered)
    left = sorted(pending, key=lambda p: (p.question, p.targets))
    picked: list[Ranked] = []
    while left and len(picked) < limit:
        best: tuple[float, int] | None = None
        for i, p in enumerate(left):
            novelty = 1.0 - max((similarity(p, s) for s in seen), default=0.0)
            if novelty < min_novelty:
                continue
            score = (1 - novelty_weight) * min(1.0, max(0.0, p.confidence)) + novelty_weight * novelty
            if best is None or score > best[0] + 1e-12:
                best = (score, i)
        if best is None:
            break
        item = left.pop(best[1])
        picked.append(Ranked(item, round(best[0], 6)))
        seen.append(item)
    return picked


def hyde_fits(limit: int) -> bool:
    """Whether a budget of `limit` model calls has room for a HyDE paragraph: the primer and the
    aggregation always keep a call each, and at least one follow-up should run besides."""
    return limit >= 4


def summaries_fit(left: int, max_summaries: int, uncached: int) -> int:
    """How many community summaries to write with `left` calls before the primer: at most half of
    what remains for follow-ups once the primer and the aggregation have theirs."""
    return max(0, min(max_summaries, uncached, (left - 2) // 2))
