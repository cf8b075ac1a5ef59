"""Keeping the best edges of a hop so that no frontier entity crowds out the others (pure numpy)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def best(scores: Sequence[float], limit: int, groups: Sequence[str] | None = None) -> list[int]:
    """Indices of the `limit` best scores, best first (stable for ties).

    With `groups` (the frontier entity each edge was found from), every group first gets
    a fair share of the budget before the rest goes to the best leftovers, so one hub's
    thousands of similar edges cannot crowd out the other entities' edges.
    """
    s = np.asarray(scores, dtype=np.float64)
    order = np.argsort(-s, kind="stable")
    if groups is None or limit >= len(order):
        return order[:limit].tolist()
    ids: dict[str, int] = {}
    g = np.fromiter((ids.setdefault(x, len(ids)) for x in groups), dtype=np.int64, count=len(groups))[order]
    share = max(2, -(-limit // max(1, len(ids))))
    # rank of each edge within its group, in score order
    by_group = np.argsort(g, kind="stable")
    sorted_g = g[by_group]
    starts = np.flatnonzero(np.r_[True, sorted_g[1:] != sorted_g[:-1]])
    run = np.arange(len(g)) - np.repeat(starts, np.diff(np.r_[starts, len(g)]))
    rank = np.empty(len(g), dtype=np.int64)
    rank[by_group] = run
    fair = rank < share
    first = order[fair][:limit]
    rest = order[~fair][: limit - len(first)]
    return np.concatenate([first, rest]).tolist()  # fair shares first, so a caller's truncation keeps them
