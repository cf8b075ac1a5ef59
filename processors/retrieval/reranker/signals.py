"""The reranker's signals, pure: question entities and the per-result scores and their fusion
(bus-free; the distances come from `relevance.distances`, run where the graph is)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from processors.algorithms.entities import choose_anchors
from schemas.graph_rag import SeedEntity
from schemas.reranker import RerankWeights, Strategy


def question_entities(seeds: Sequence[SeedEntity], vector_seeds: int, min_similarity: float) -> list[str]:
    """The question's entities: those it names (without names inside a longer name), else the
    `vector_seeds` nearest by vector whose similarity reaches `min_similarity` (maybe none)."""
    named = [e for e in seeds if e.lexical and e.label]
    if named:
        return choose_anchors(named)
    near = [e for e in seeds if not e.lexical and e.score >= min_similarity]
    return [e.id for e in sorted(near, key=lambda e: -e.score)[:vector_seeds]]


def distance_score(hops: int | None) -> float:
    """1 / (1 + d): 1 for a question entity, 0.5 one hop away, 0.25 three hops away; 0 when not
    reached within the maximum distance (or disconnected)."""
    return 0.0 if hops is None else 1.0 / (1.0 + hops)


def normalised(scores: Sequence[float]) -> list[float]:
    """Min-max normalised to 0..1 over the request (all 1.0 when they are all equal)."""
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    if hi <= lo:
        return [1.0] * len(scores)
    return [(x - lo) / (hi - lo) for x in scores]


def closest_entity(entities: Sequence[str], hops: Mapping[str, int]) -> tuple[str | None, int | None]:
    """The entity of `entities` closest to the question, and its distance (None, None: none reached)."""
    best: tuple[str | None, int | None] = (None, None)
    for e in entities:
        d = hops.get(e)
        if d is not None and (best[1] is None or d < best[1]):
            best = (e, d)
    return best


def most_episodes(entities: Sequence[str], counts: Mapping[str, int]) -> int:
    """The most episodes that mention one of `entities`."""
    return max((counts.get(e, 0) for e in entities), default=0)


@dataclass(frozen=True)
class Signals:
    """One result's signals, each 0..1 (semantic None when the strategy does not use it)."""

    original: float  # normalised
    episode: float = 0.0
    distance: float = 0.0
    semantic: float | None = None


def fuse(strategy: Strategy, w: RerankWeights, x: Signals) -> tuple[float, float]:
    """(graph score, combined score). Hybrid: original·w_o + episode·w_e + distance·w_d, its graph
    score the episode and distance part reweighted to 0..1; a single-signal strategy:
    original·w_o + signal·(1 − w_o), its graph score that signal."""
    if strategy == "hybrid":
        graph_w = w.episode + w.distance
        graph = (w.episode * x.episode + w.distance * x.distance) / graph_w if graph_w > 0 else 0.0
        return graph, w.original * x.original + w.episode * x.episode + w.distance * x.distance
    signal = {"semantic": x.semantic or 0.0, "episode": x.episode, "distance": x.distance}[strategy]
    return signal, w.original * x.original + (1.0 - w.original) * signal
