"""Shortest distances by batched breadth-first search: one adjacency read per level for the whole
frontier (bus-free; the triples service runs it next to the store, so a search is one request)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

# The edges (s, o) between IRIs that touch any entity of a frontier: one store round trip.
EdgeReader = Callable[[list[str]], Awaitable[list[tuple[str, str]]]]


@dataclass(frozen=True)
class DistanceSearch:
    """What a distance search asks: from `sources` to `targets` (groups: a result's entities; a
    group is done once one of its entities is reached), reading each frontier entity's first
    `per_entity` edges per direction, at most `max_frontier` entities per level."""

    sources: list[str]
    targets: list[list[str]]
    max_distance: int
    per_entity: int
    max_frontier: int


@dataclass
class Distances:
    """Hops from the nearest source to every entity reached, and the levels read to find them."""

    hops: dict[str, int]
    levels: int  # adjacency reads: one per level searched
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
    groups = list(groups)
    owners: dict[str, list[int]] = {}  # entity -> the groups it is in: a reached entity closes them
    for i, g in enumerate(groups):
        for e in g:
            owners.setdefault(e, []).append(i)
    open_groups = {i for i, g in enumerate(groups) if g and not any(e in hops for e in g)}
    levels, truncated = 0, False
    for level in range(1, max_distance + 1):
        if not open_groups or not frontier:
            break
        reverse = False
        if level == max_distance:
            pending = list(dict.fromkeys(e for i in sorted(open_groups) for e in groups[i]))
            reverse = len(pending) < len(frontier)
        ask = pending if reverse else frontier
        if len(ask) > max_frontier:
            ask, truncated = ask[:max_frontier], True
        edges = await read_edges(ask)
        levels += 1
        asked = set(ask)
        if reverse:  # the last level: which pending entities touch the frontier
            inside = set(frontier)
            for a, b in edges:
                if a in asked and b in inside:
                    hops.setdefault(a, level)
                if b in asked and a in inside:
                    hops.setdefault(b, level)
            break
        frontier = _reached(edges, asked, hops, level)
        for e in frontier:
            open_groups.difference_update(owners.get(e, ()))
    return Distances(hops, levels, truncated)


def _reached(edges: Sequence[tuple[str, str]], asked: set[str], hops: dict[str, int], level: int) -> list[str]:
    """The far ends of `edges` from the asked entities not reached before, now at `level`."""
    reached: list[str] = []
    for a, b in edges:
        if a in asked and b not in hops:
            hops[b] = level
            reached.append(b)
        if b in asked and a not in hops:
            hops[a] = level
            reached.append(a)
    return reached
