"""Hierarchical communities of the concept graph by Leiden, bottom-up (pure).

Level 0 is Leiden over the co-occurrence graph (`graspologic-native`, the implementation
Microsoft GraphRAG uses; clusters above `max_cluster_size` are split again). Each higher level
is Leiden over the graph of the level below, its communities contracted to nodes (edge weight:
the weight between them), so every community has one parent and the top level holds the
broadest ones. A community's id hashes its level and members: a rebuild that leaves a community
as it was keeps its id, and so its cached summary.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

SEED = 7  # deterministic partitions: the same graph gives the same communities


class CommunityParams(BaseModel):
    """Flow parameters of community detection."""

    community_max_size: int = Field(default=40, ge=2, le=100_000)  # level-0 communities at most this big
    community_resolution: float = Field(default=1.0, gt=0)
    community_levels: int = Field(default=4, ge=1, le=8)  # at most this many levels


@dataclass
class Community:
    """A community: its level, members (entity IRIs, all levels below included) and parent."""

    id: str
    level: int
    members: list[str]
    parent: str | None = None
    children: list[str] = field(default_factory=list)


def community_id(level: int, members: Sequence[str]) -> str:
    """Stable id of a community (level + sorted members)."""
    digest = hashlib.sha256((f"{level}\0" + "\0".join(sorted(members))).encode()).hexdigest()[:16]
    return f"k{digest}"


def _leiden(edges: list[tuple[str, str, float]], params: CommunityParams, max_size: int) -> dict[str, int]:
    """Node -> final cluster of hierarchical Leiden."""
    from graspologic_native import hierarchical_leiden

    found = hierarchical_leiden(
        edges, resolution=params.community_resolution, max_cluster_size=max_size, seed=SEED, use_modularity=True
    )
    return {c.node: c.cluster for c in found if c.is_final_cluster}


def detect(edges: Sequence[tuple[str, str, float]], params: CommunityParams) -> list[Community]:
    """Communities of every level, leaves (level 0) first."""
    graph = _undirected(edges)
    if not graph:
        return []
    leaves: dict[int, list[str]] = {}
    for node, cl in _leiden(graph, params, params.community_max_size).items():
        leaves.setdefault(cl, []).append(node)
    level = sorted((Community(community_id(0, ms), 0, sorted(ms)) for ms in leaves.values()), key=lambda c: c.id)
    out = list(level)
    while len(level) > 1 and level[0].level + 1 < params.community_levels:
        parents = _level_above(graph, level, params)
        if not parents or len(parents) >= len(level) * 0.9:  # the level above would be nearly the same
            break
        out += parents
        level = parents
    return out


def _undirected(edges: Sequence[tuple[str, str, float]]) -> list[tuple[str, str, float]]:
    """Edges merged per unordered pair (weights summed), self-loops and non-positive weights dropped."""
    merged: dict[tuple[str, str], float] = {}
    for a, b, w in edges:
        if a != b and w > 0:
            key = (a, b) if a < b else (b, a)
            merged[key] = merged.get(key, 0.0) + w
    return [(a, b, w) for (a, b), w in sorted(merged.items())]


def _level_above(
    graph: list[tuple[str, str, float]], level: list[Community], params: CommunityParams
) -> list[Community]:
    """Leiden over `level`'s communities contracted to nodes; each parent lists its children."""
    owner = {m: c.id for c in level for m in c.members}
    contracted = _undirected([(owner[a], owner[b], w) for a, b, w in graph if a in owner and b in owner])
    if not contracted:
        return []
    kids: dict[int, list[str]] = {}
    for cid, cl in _leiden(contracted, params, len(level)).items():
        kids.setdefault(cl, []).append(cid)
    by_id = {c.id: c for c in level}
    parents = []
    for ids in kids.values():
        members = sorted(m for k in ids for m in by_id[k].members)
        parent = Community(community_id(level[0].level + 1, members), level[0].level + 1, members, children=sorted(ids))
        for k in ids:
            by_id[k].parent = parent.id
        parents.append(parent)
    return sorted(parents, key=lambda c: c.id)
