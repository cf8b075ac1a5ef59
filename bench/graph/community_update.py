"""The update after a one-document write, timed over a built synthetic graph (bench/graph/communities.py).

The document is one chunk shaped as the graph's: as many concepts as a chunk has, NEW of them new,
the others those of a random chunk (so hubs are as likely as in the corpus), related within
windows of sentence size. Its concepts' level-0 communities go stale; the update re-clusters their
members and the new concepts over the subgraph they induce (`recluster`) and makes the new
communities' records with their profile vectors.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from processors.algorithms.leiden import Edges, undirected
from processors.ingest.communities.detect import CommunityParams, Hierarchy
from processors.ingest.communities.update import Stale, recluster
from processors.stores.community_graph import CommunityGraph, Mentions, mean_vector

NEW = 3  # new concepts in the document
WINDOW = 5  # concepts related pairwise: those within a sentence-sized window
DIMS = 384


def time_update(
    graph: CommunityGraph, found: Hierarchy, mentions: np.ndarray, seed: int, params: CommunityParams
) -> dict[str, Any]:
    """update_s (re-cluster and records), update_subgraph_s (cutting the subgraph from the arrays,
    a store's query), and what the update touched."""
    rng = np.random.default_rng(seed + 1)
    vocab = len(graph.names)
    row = mentions[int(rng.integers(len(mentions)))].astype(np.int64)
    row[rng.choice(len(row), NEW, replace=False)] = vocab + np.arange(NEW)
    names = graph.names + [f"http://kgflow.org/e/new_{i}" for i in range(NEW)]
    pairs = [(row[i], row[j]) for i in range(len(row)) for j in range(i + 1, min(i + WINDOW, len(row)))]
    started = time.perf_counter()
    stale = _stale(found, names, row[row < vocab])
    stale.pending = [names[x] for x in row[row >= vocab].tolist()]
    sub = _subgraph(graph, names, stale.touched(), pairs, row)
    cut_s = time.perf_counter() - started
    change = recluster(stale, sub, params)
    vecs = np.random.default_rng(seed).standard_normal((len(sub.chunks), DIMS), dtype=np.float32)
    at = {c: i for i, c in enumerate(sub.chunks)}
    for r in change.added:
        r.vector = mean_vector([vecs[at[c]] for c in r.vector_chunks])
    total = time.perf_counter() - started
    return {
        "update_s": round(total - cut_s, 2),
        "update_subgraph_s": round(cut_s, 2),
        "update_touched": {"stale_communities": len(stale.communities), "concepts": len(stale.touched()),
                           "subgraph_relations": len(sub.edges), "communities_after": len(change.added)},
    }  # fmt: skip


def _stale(found: Hierarchy, names: list[str], concepts: np.ndarray) -> Stale:
    """The level-0 communities of these concepts, with members and ancestors (what the store reads)."""
    labels = found.labels[0]
    held = sorted({int(c) for c in labels[concepts] if c >= 0})
    communities, ancestors = {}, {}
    for c in held:
        cid = found.ids[0][c]
        communities[cid] = [names[m] for m in found.members[0][c].tolist()]
        chain, at = [], c
        for level in range(len(found.ids) - 1):
            at = int(found.parents[level][at])
            if at < 0:
                break
            chain.append(found.ids[level + 1][at])
        ancestors[cid] = chain
    return Stale(communities, ancestors)


def _node(name: str, vocab: int) -> int:
    """A synthetic concept's node id, from its IRI (concept_<id>, or new_<n>: vocab + n)."""
    kind, n = name.rsplit("/", 1)[1].rsplit("_", 1)
    return int(n) + (vocab if kind == "new" else 0)


def _subgraph(
    graph: CommunityGraph, names: list[str], touched: list[str], pairs: list[tuple[int, int]], row: np.ndarray
) -> CommunityGraph:
    """The graph between the touched concepts, the document's relations and mentions included, on
    local ids (as the store's query among entities returns it)."""
    nodes = np.asarray(sorted(_node(x, len(graph.names)) for x in touched))
    e, m = graph.edges, graph.mentions
    keep = np.isin(e.src, nodes) & np.isin(e.dst, nodes)
    src = np.concatenate([e.src[keep], [a for a, _ in pairs]]).astype(np.int64)
    dst = np.concatenate([e.dst[keep], [b for _, b in pairs]]).astype(np.int64)
    weight = np.concatenate([e.weight[keep], np.ones(len(pairs), dtype=np.float32)])
    inside = np.isin(src, nodes) & np.isin(dst, nodes)
    said = np.flatnonzero(np.isin(m.entity, nodes))
    chunks, chunk_of = np.unique(m.chunk[said], return_inverse=True)
    doc = np.isin(row, nodes)
    entity = np.concatenate([np.searchsorted(nodes, m.entity[said]), np.searchsorted(nodes, row[doc])])
    return CommunityGraph(
        [names[x] for x in nodes.tolist()],
        undirected(Edges.of(np.searchsorted(nodes, src[inside]), np.searchsorted(nodes, dst[inside]), weight[inside]),
                   len(nodes)),
        [graph.chunks[c] for c in chunks.tolist()] + ["new-document:0"],
        Mentions(entity.astype(np.int32),
                 np.concatenate([chunk_of, np.full(int(doc.sum()), len(chunks))]).astype(np.int32),
                 np.ones(len(said) + int(doc.sum()), dtype=np.int32)),
    )  # fmt: skip
