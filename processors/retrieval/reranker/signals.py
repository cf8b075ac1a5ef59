"""The reranker's signals, pure: question entities, shortest distances by batched breadth-first
search, and the per-result scores and their fusion (bus-free)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from processors.retrieval.relevance.ranking import choose_anchors
from schemas.graph_rag import SeedEntity
from schemas.reranker import RerankWeights, Strategy

# The edges (s, o) between IRIs that touch any entity of a frontier: one store round trip.
EdgeReader = Callable[[list[str]], Awaitable[list[tuple[str, str]]]]


def question_entities(seeds: Sequence[SeedEntity], vector_seeds: int, min_similarity: float) -> list[str]:
    """The question's entities: those it names (without names inside a longer name), else the
    `vector_seeds` nearest by vector whose similarity reaches `min_similarity` (maybe none)."""
    named = [e for e in seeds if e.lexical and e.label]
    if named:
        return choose_anchors(named)
    near = [e for e in seeds if not e.lexical and e.score >= min_similarity]
    return [e.id for e in sorted(near, key=lambda e: -e.score)[:vector_seeds]]


@dataclass
class Distances:
    """Hops from the nearest source to every entity reached, and what finding them cost."""

    hops: dict[str, int]
    round_trips: int
    truncated: bool  # a frontier was cut to `max_frontier` entities


async def shortest_distances(
    read_edges: EdgeReader,
    sources: Iterable[str],
    groups: Iterable[Sequence[str]],
    max_distance: int,
    max_frontier: int,
) -> Distances:
    """Breadth-first search from `sources`, one `read_edges` round trip per level for the whole
    frontier (edges count in both directions), up to `max_distance` levels.

    `groups` are the results' entities: a result's distance is its nearest entity's, so the
    search stops as soon as every result has an entity reached (or nothing new is). The last
    level only has to tell which entities of unresolved results touch the frontier, so it reads
    their edges instead when they are fewer than the frontier."""
    hops = {e: 0 for e in sources}
    frontier = list(hops)
    open_groups = [g for g in groups if g and not any(e in hops for e in g)]
    trips, truncated = 0, False
    for level in range(1, max_distance + 1):
        if not open_groups or not frontier:
            break
        pending = list(dict.fromkeys(e for g in open_groups for e in g))
        reverse = level == max_distance and len(pending) < len(frontier)
        ask = pending if reverse else frontier
        if len(ask) > max_frontier:
            ask, truncated = ask[:max_frontier], True
        edges = await read_edges(ask)
        trips += 1
        asked = set(ask)
        if reverse:  # the last level: which pending entities touch the frontier
            inside = set(frontier)
            for a, b in edges:
                for near, far in ((a, b), (b, a)):
                    if near in asked and far in inside:
                        hops.setdefault(near, level)
            break
        reached: list[str] = []
        for a, b in edges:
            for near, far in ((a, b), (b, a)):
                if near in asked and far not in hops:
                    hops[far] = level
                    reached.append(far)
        open_groups = [g for g in open_groups if not any(e in hops for e in g)]
        frontier = reached
    return Distances(hops, trips, truncated)


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


def nearest(entities: Sequence[str], hops: Mapping[str, int]) -> tuple[str | None, int | None]:
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
