"""Hierarchical communities of the concept graph by Leiden, bottom-up (pure), over arrays.

Level 0 is Leiden over the co-occurrence graph (processors/algorithms/leiden.py: networkit's
Leiden on integer node ids; clusters above `community_max_size` are split again). Each higher
level is Leiden over the graph of the level below, its communities contracted to nodes (edge
weight: the weight between them), so every community has one parent and the top level holds the
broadest ones; a community with no edge to another has no parent. A community's id hashes its
level and members: a rebuild that leaves a community as it was keeps its id, and so its cached
summary. The graph is held as integer arrays throughout (`Hierarchy`): no Python object per edge
or per member until a page of communities is written.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from pydantic import BaseModel, Field

from processors.algorithms.leiden import SEED, Edges, contract, hierarchical, leiden, undirected
from processors.stores.community_graph import CommunityGraph

__all__ = ["SEED", "Community", "CommunityParams", "Hierarchy", "community_id", "detect", "hierarchy"]


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


@dataclass
class Hierarchy:
    """Communities of every level as arrays over the graph's nodes (node id = index in `names`).

    `labels[L][node]` is the node's community index at level L (-1: none), `parents[L][c]` the
    index at level L+1 of community c's parent (-1: none), `ids[L][c]` its id, `members[L][c]` its
    members' node ids sorted by name."""

    names: list[str]
    edges: Edges  # merged, undirected
    rank: np.ndarray  # each node's position in name order
    labels: list[np.ndarray] = field(default_factory=list)
    parents: list[np.ndarray] = field(default_factory=list)
    ids: list[list[str]] = field(default_factory=list)
    members: list[list[np.ndarray]] = field(default_factory=list)

    def communities(self) -> list[Community]:
        """Every community as an object, leaves first, each level ordered by id (small graphs)."""
        out = []
        for level, ids in enumerate(self.ids):
            kids: dict[int, list[str]] = {}
            if level > 0:
                for child, parent in enumerate(self.parents[level - 1].tolist()):
                    if parent >= 0:
                        kids.setdefault(parent, []).append(self.ids[level - 1][child])
            up = self.parents[level].tolist() if level < len(self.parents) else [-1] * len(ids)
            for c, cid in enumerate(ids):
                members = [self.names[m] for m in self.members[level][c].tolist()]
                parent = self.ids[level + 1][up[c]] if up[c] >= 0 else None
                out.append(Community(cid, level, members, parent, sorted(kids.get(c, []))))
        return sorted(out, key=lambda c: (c.level, c.id))


def detect(graph: CommunityGraph, params: CommunityParams) -> list[Community]:
    """Communities of every level, leaves (level 0) first."""
    return hierarchy(graph, params).communities()


def hierarchy(graph: CommunityGraph, params: CommunityParams) -> Hierarchy:
    """The communities of every level of `graph` (see the module docstring)."""
    n = len(graph.names)
    edges = graph.edges  # merged (`undirected`), as a CommunityGraph holds them
    order = sorted(range(n), key=graph.names.__getitem__)
    rank = np.empty(n, dtype=np.int64)
    rank[np.asarray(order, dtype=np.int64)] = np.arange(n)
    del order
    found = Hierarchy(graph.names, edges, rank)
    if len(edges) == 0:
        return found
    linked = np.zeros(n, dtype=bool)  # only nodes with an edge are clustered (the others: singletons, dropped)
    linked[edges.src] = linked[edges.dst] = True
    # Leiden runs on nodes numbered by name, not by the order the store read them in (which differs
    # between two stores of the same documents): the same graph gives the same communities.
    by_name = rank.astype(np.int32)
    canonical = undirected(Edges(by_name[edges.src], by_name[edges.dst], edges.weight), n)
    labels = hierarchical(canonical, n, params.community_max_size, params.community_resolution)[by_name]
    del canonical
    _, labels = np.unique(np.where(linked, labels, -1), return_inverse=True)
    labels = (labels - (0 if linked.all() else 1)).astype(np.int32)
    _add_level(found, labels)
    graph_of_level = contract(edges, labels)
    while len(found.ids) < params.community_levels and len(graph_of_level):
        k = len(found.ids[-1])
        present = np.zeros(k, dtype=bool)
        present[graph_of_level.src] = present[graph_of_level.dst] = True
        up = leiden(graph_of_level, k, params.community_resolution)
        up = np.where(present, up, -1)
        _, up = np.unique(up, return_inverse=True)  # renumber 0.. (-1, if any, first)
        up = up.astype(np.int32) - (0 if present.all() else 1)
        size = int(up.max()) + 1
        if size >= k * 0.9:  # the level above would be nearly the same
            break
        found.parents.append(up)
        below = found.labels[-1]
        _add_level(found, np.where(below >= 0, up[below], -1).astype(np.int32))
        graph_of_level = contract(graph_of_level, up)  # (a community without a parent has no edge)
    found.parents.append(np.full(len(found.ids[-1]), -1, dtype=np.int32))
    return found


def _add_level(found: Hierarchy, labels: np.ndarray) -> None:
    """Record a level: each community's members (sorted by name) and id."""
    level = len(found.ids)
    rank = found.rank
    held = np.flatnonzero(labels >= 0)
    order = held[np.lexsort((rank[held], labels[held]))]
    cut = np.flatnonzero(np.diff(labels[order])) + 1
    members = np.split(order, cut) if len(order) else []
    found.labels.append(labels)
    found.members.append(members)
    found.ids.append([community_id(level, [found.names[m] for m in ms.tolist()]) for ms in members])
