"""The tuning and validation halves of a public doc-QA set: questions are
split by a fixed seed, half and half; the corpus stays whole (every paragraph is indexed for both
halves, as a user's collection would be). Defaults are chosen on the tuning half only; the bench
reports both."""

from __future__ import annotations

import random
from typing import Any

SEED = 31


def halves(questions: list[dict[str, Any]], seed: int = SEED) -> dict[str, list[dict[str, Any]]]:
    """{"tuning": ..., "validation": ...}: the questions shuffled by `seed` (by id, so the split
    does not depend on the file's order) and cut in two (the tuning half gets the odd one)."""
    ordered = sorted(questions, key=lambda q: str(q["id"]))
    random.Random(seed).shuffle(ordered)
    cut = (len(ordered) + 1) // 2
    return {"tuning": ordered[:cut], "validation": ordered[cut:]}
