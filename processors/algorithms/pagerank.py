"""Personalised PageRank over a retrieved neighbourhood (pure numpy).

HippoRAG's idea: seed the question's entities and its best passages, let mass flow through
passage-entity and entity-entity links, and read passage relevance off the stationary mass. A
bridge passage that shares no words with the question still ranks when it names an entity the
question's passages name. Computed over the neighbourhood a request retrieved, never the graph.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

DAMPING = 0.5  # HippoRAG's: half the mass returns to the seeds each step, keeping walks short
ITERATIONS = 30


class WeightedGraph:
    """An undirected weighted graph over string node ids, built edge by edge."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.src: list[int] = []
        self.dst: list[int] = []
        self.weight: list[float] = []

    def node(self, name: str) -> int:
        """The node's index (added if new)."""
        return self.index.setdefault(name, len(self.index))

    def link(self, a: str, b: str, w: float) -> None:
        """An undirected edge (both directions)."""
        if w <= 0 or a == b:
            return
        i, j = self.node(a), self.node(b)
        self.src += [i, j]
        self.dst += [j, i]
        self.weight += [w, w]


def personalized_pagerank(
    graph: WeightedGraph, seeds: Mapping[str, float], damping: float = DAMPING, iterations: int = ITERATIONS
) -> dict[str, float]:
    """Stationary mass of each node for a walk that restarts at `seeds` (weights normalised)."""
    n = len(graph.index)
    if n == 0:
        return {}
    p = np.zeros(n)
    for name, w in seeds.items():
        if name in graph.index and w > 0:
            p[graph.index[name]] += w
    if p.sum() == 0:
        return {}
    p /= p.sum()
    src, dst = np.asarray(graph.src, dtype=np.int64), np.asarray(graph.dst, dtype=np.int64)
    w = np.asarray(graph.weight, dtype=np.float64)
    out_weight = np.bincount(src, weights=w, minlength=n)
    share = w / np.where(out_weight[src] == 0, 1.0, out_weight[src])
    dangling = out_weight == 0
    x = p.copy()
    for _ in range(iterations):
        flow = np.bincount(dst, weights=x[src] * share, minlength=n)
        x = (1 - damping) * p + damping * (flow + x[dangling].sum() * p)
    return {name: float(x[i]) for name, i in graph.index.items()}


def normalise(scores: Iterable[tuple[str, float]]) -> dict[str, float]:
    """Scores scaled to sum to 1 (non-positive ones dropped)."""
    kept = {k: v for k, v in scores if v > 0}
    total = sum(kept.values())
    return {k: v / total for k, v in kept.items()} if total else {}
