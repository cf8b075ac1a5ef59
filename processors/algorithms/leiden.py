"""Leiden communities of a weighted graph held in integer arrays (pure).

A graph is node ids 0..n-1 and three parallel arrays (`Edges`: src, dst int32, weight float32),
never a Python object per edge: 25M edges take 250 MB. Leiden is networkit's (C++, built straight
from the arrays by `GraphFromCoo`), run on one thread with a fixed seed so that the same graph
gives the same partition (a community's id hashes its members, and its cached summary hangs on
it). `hierarchical` splits any cluster above a size again by Leiden over its own subgraph, as
graspologic's `hierarchical_leiden` does; `contract` makes the graph of a partition's clusters.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SEED = 7


@dataclass(frozen=True, eq=False)
class Edges:
    """Weighted edges between integer node ids (parallel arrays)."""

    src: np.ndarray  # int32
    dst: np.ndarray  # int32
    weight: np.ndarray  # float32

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Edges) and all(
            np.array_equal(getattr(self, f), getattr(other, f)) for f in ("src", "dst", "weight")
        )

    __hash__ = None  # type: ignore[assignment]

    @staticmethod
    def of(src: object, dst: object, weight: object) -> Edges:
        """Edges from any array-likes, in the arrays' types."""
        return Edges(
            np.asarray(src, dtype=np.int32), np.asarray(dst, dtype=np.int32), np.asarray(weight, dtype=np.float32)
        )

    @staticmethod
    def concat(parts: list[Edges]) -> Edges:
        """The edges of every part, in order."""
        if not parts:
            return Edges.of([], [], [])
        return Edges(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("src", "dst", "weight")))

    def __len__(self) -> int:
        return len(self.src)


def undirected(edges: Edges, n: int) -> Edges:
    """Edges merged per unordered pair (weights summed), self-loops and non-positive weights
    dropped, ordered by (smaller id, larger id)."""
    keep = (edges.src != edges.dst) & (edges.weight > 0)
    keys = np.minimum(edges.src[keep], edges.dst[keep]).astype(np.int64)
    keys *= n
    keys += np.maximum(edges.src[keep], edges.dst[keep])  # one int64 key per pair: no tuple per edge
    order = np.argsort(keys, kind="stable")
    keys, weight = keys[order], edges.weight[keep][order].astype(np.float64)
    del order
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else np.zeros(0, dtype=np.int64)
    summed = np.add.reduceat(weight, starts).astype(np.float32) if len(keys) else np.zeros(0, dtype=np.float32)
    keys = keys[starts]
    return Edges((keys // n).astype(np.int32), (keys % n).astype(np.int32), summed)


def leiden(edges: Edges, n: int, resolution: float = 1.0, seed: int = SEED) -> np.ndarray:
    """Cluster of every node (0..k-1, numbered by each cluster's smallest node), by Leiden
    maximising modularity; a node with no edge is a cluster of its own."""
    import networkit as nk

    if len(edges) == 0:
        return np.arange(n, dtype=np.int32)
    nk.setNumberOfThreads(1)  # one thread: a seeded run is then reproducible
    nk.setSeed(seed, False)
    # int32 ids and float32 weights are read in place (no copy of the arrays)
    graph = nk.graph.GraphFromCoo((edges.weight, (edges.src, edges.dst)), n=n, weighted=True, directed=False)
    algo = nk.community.ParallelLeiden(graph, iterations=3, randomize=True, gamma=resolution)
    algo.run()
    raw = np.asarray(algo.getPartition().getVector(), dtype=np.int64)
    del graph, algo
    return _numbered(raw)


def _numbered(raw: np.ndarray) -> np.ndarray:
    """Cluster labels renumbered 0..k-1 in the order of each cluster's first node."""
    _, first, inverse = np.unique(raw, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int32)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first), dtype=np.int32)
    return rank[inverse]


def hierarchical(edges: Edges, n: int, max_size: int, resolution: float = 1.0, seed: int = SEED) -> np.ndarray:
    """Leiden, then every cluster above `max_size` split again by Leiden over its own subgraph, until
    none is above it or Leiden cannot split it (a cluster with no inner structure stays whole)."""
    labels = leiden(edges, n, resolution, seed)
    whole: set[int] = set()  # clusters Leiden left in one piece
    while True:
        big = np.bincount(labels) > max_size
        big[list(whole)] = False
        if not big.any():
            return _numbered(labels)
        ls = labels[edges.src]
        inside = np.flatnonzero((ls == labels[edges.dst]) & big[ls])
        inside = inside[np.argsort(ls[inside], kind="stable")]
        cut = np.flatnonzero(np.diff(ls[inside])) + 1
        nxt = int(labels.max()) + 1
        for part in np.split(inside, cut):
            cluster = int(ls[part[0]])
            sub, nodes = _induced(edges, part)
            split = leiden(sub, len(nodes), resolution, seed)
            if split.max() == 0:
                whole.add(cluster)
                continue
            labels[nodes] = nxt + split
            nxt += int(split.max()) + 1


def _induced(edges: Edges, rows: np.ndarray) -> tuple[Edges, np.ndarray]:
    """The subgraph of these edge rows on local ids 0..k-1, and the global id of each local one."""
    src, dst = edges.src[rows], edges.dst[rows]
    nodes = np.unique(np.concatenate([src, dst]))
    local = Edges(
        np.searchsorted(nodes, src).astype(np.int32), np.searchsorted(nodes, dst).astype(np.int32), edges.weight[rows]
    )
    return local, nodes


def contract(edges: Edges, labels: np.ndarray) -> Edges:
    """The graph of the clusters: one node per cluster, edge weight the weight between them."""
    k = int(labels.max()) + 1 if len(labels) else 0
    return undirected(Edges(labels[edges.src], labels[edges.dst], edges.weight), k)
