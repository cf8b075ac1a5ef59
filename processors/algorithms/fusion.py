"""Fusing rankings from different retrievers (pure)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
RRF_K = 60  # the constant of Cormack et al.'s reciprocal rank fusion


def reciprocal_rank_fusion(rankings: Sequence[Sequence[K]], k: int = RRF_K) -> dict[K, float]:
    """Score of each item: the sum over rankings of 1 / (k + rank), rank starting at 1."""
    fused: dict[K, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, 1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
    return fused
