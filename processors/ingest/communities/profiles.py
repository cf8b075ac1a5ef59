"""What a community is about, without a model (pure): its chunks, its most central entities,
its most representative chunks and a profile vector (the mean of those chunks' vectors).

A level-0 community's chunks are the chunks that mention its members (weight: how many member
mentions); a parent's are its children's. The profile stands in for a summary until a query
asks for one, and its vector is what community search (DRIFT's primer) ranks by.

`Profiles` computes them over a `Hierarchy` with sparse matrices (community x chunk weights, one
per level) and hands out records a page of communities at a time, so a build never holds every
community's chunk map at once; the store computes each profile vector from the record's
`vector_chunks` as it writes the page.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from processors.ingest.communities.detect import Community, Hierarchy
from processors.stores.community_graph import CommunityGraph, mean_vector, parent_hash
from processors.stores.documents_protocol import CommunityRecord

TOP_ENTITIES = 10
TOP_CHUNKS = 5
VECTOR_CHUNKS = 10  # chunks averaged into the profile vector
PAGE = 1000  # communities whose records are made (and written) at once


def membership_hash(members: Sequence[str]) -> str:
    """What a level-0 community's cached summary is valid for: the sorted members (above level 0:
    `parent_hash` of the children's)."""
    return hashlib.sha256("\0".join(sorted(members)).encode()).hexdigest()[:16]


class Profiles:
    """The profiles of a hierarchy's communities (see the module docstring)."""

    def __init__(self, found: Hierarchy, graph: CommunityGraph) -> None:
        self.found, self.chunk_ids = found, graph.chunks
        lab0 = found.labels[0] if found.labels else np.zeros(0, dtype=np.int32)
        e = found.edges
        inside = np.flatnonzero((lab0[e.src] >= 0) & (lab0[e.src] == lab0[e.dst])) if len(lab0) else []
        n = len(found.names)
        degree = np.bincount(e.src[inside], e.weight[inside], n) + np.bincount(e.dst[inside], e.weight[inside], n)
        self.by_centrality = np.lexsort((found.rank, -degree))  # nodes, most central first (ties by name)
        order = sorted(range(len(graph.chunks)), key=graph.chunks.__getitem__)
        self.chunk_rank = np.empty(len(order), dtype=np.int64)
        self.chunk_rank[np.asarray(order, dtype=np.int64)] = np.arange(len(order))
        self.weights = self._chunk_weights(graph)

    def _chunk_weights(self, graph: CommunityGraph) -> list[sp.csr_matrix]:
        """Per level, community x chunk weights: member mentions at level 0, children's sums above."""
        out: list[sp.csr_matrix] = []
        m, shape_c = graph.mentions, len(graph.chunks)
        for level, labels in enumerate(self.found.labels):
            k = len(self.found.ids[level])
            if level == 0:
                held = labels[m.entity] >= 0
                rows, cols, vals = labels[m.entity][held], m.chunk[held], m.count[held].astype(np.float64)
                out.append(sp.csr_matrix((vals, (rows, cols)), shape=(k, shape_c)))
            else:
                up = self.found.parents[level - 1]
                kids = np.flatnonzero(up >= 0)
                to_parent = sp.csr_matrix((np.ones(len(kids)), (up[kids], kids)), shape=(k, len(up)))
                out.append((to_parent @ out[-1]).tocsr())
        for w in out:
            w.sum_duplicates()
        return out

    def pages(self, page: int = PAGE) -> Iterator[list[CommunityRecord]]:
        """Every community's record (no vector: see `vector_chunks`), leaves first, `page` at a time."""
        for level in range(len(self.found.ids)):
            for at in range(0, len(self.found.ids[level]), page):
                yield self.records(level, range(at, min(at + page, len(self.found.ids[level]))))

    def records(self, level: int, indexes: Sequence[int]) -> list[CommunityRecord]:
        """The records of these communities of `level`."""
        f = self.found
        ids, names = f.ids[level], f.names
        up = f.parents[level] if level < len(f.parents) else None
        kids = self._children(level)
        tops = self._top_entities(level)
        out = []
        for c in indexes:
            members = [names[m] for m in f.members[level][c].tolist()]
            chunks, ranked = self._chunks(level, c)
            parent = f.ids[level + 1][int(up[c])] if up is not None and up[c] >= 0 else None
            out.append(CommunityRecord(
                id=ids[c], level=level, parent=parent, children=sorted(f.ids[level - 1][k] for k in kids.get(c, [])),
                members=members, chunks=chunks, top_entities=[names[m] for m in tops[c]],
                top_chunks=ranked[:TOP_CHUNKS], membership_hash=self._hashes(level)[c],
                vector_chunks=ranked[:VECTOR_CHUNKS],
            ))  # fmt: skip
        return out

    def _chunks(self, level: int, c: int) -> tuple[dict[str, float], list[str]]:
        """A community's chunk weights, and its chunk ids heaviest first (ties by id)."""
        w = self.weights[level]
        cols, vals = w.indices[w.indptr[c] : w.indptr[c + 1]], w.data[w.indptr[c] : w.indptr[c + 1]]
        order = np.lexsort((self.chunk_rank[cols], -vals))
        ids = self.chunk_ids
        return {ids[j]: float(v) for j, v in zip(cols.tolist(), vals.tolist(), strict=True)}, [
            ids[j] for j in cols[order].tolist()
        ]

    def _hashes(self, level: int) -> list[str]:
        """Membership hashes of a level's communities: of the members at level 0, of the children's
        hashes above (`parent_hash`); kept for the level and the one below."""
        cache = self.__dict__.setdefault("_hash", {})
        if level not in cache:
            f = self.found
            if level == 0:
                cache[0] = [membership_hash([f.names[m] for m in ms.tolist()]) for ms in f.members[0]]
            else:
                below, kids = self._hashes(level - 1), self._children(level)
                cache[level] = [parent_hash(below[k] for k in kids.get(c, [])) for c in range(len(f.ids[level]))]
            for old in [x for x in cache if x < level - 1]:
                del cache[old]
        return cache[level]  # type: ignore[no-any-return]

    def _children(self, level: int) -> dict[int, list[int]]:
        cache = self.__dict__.setdefault("_kids", {})
        if level not in cache:
            kids: dict[int, list[int]] = {}
            if level > 0:
                for child, parent in enumerate(self.found.parents[level - 1].tolist()):
                    if parent >= 0:
                        kids.setdefault(parent, []).append(child)
            cache.clear()  # one level at a time: pages go level by level
            cache[level] = kids
        return cache[level]  # type: ignore[no-any-return]

    def _top_entities(self, level: int) -> list[list[int]]:
        """Per community of `level`, its TOP_ENTITIES most central members (by inner degree, then name)."""
        cache = self.__dict__.setdefault("_tops", {})
        if level not in cache:
            labels = self.found.labels[level]
            o = self.by_centrality[labels[self.by_centrality] >= 0]
            o = o[np.argsort(labels[o], kind="stable")]
            starts = np.searchsorted(labels[o], np.arange(len(self.found.ids[level])))
            cache.clear()
            cache[level] = [o[s : s + TOP_ENTITIES][labels[o[s : s + TOP_ENTITIES]] == c].tolist()
                            for c, s in enumerate(starts.tolist())]  # fmt: skip
        return cache[level]  # type: ignore[no-any-return]


def profile(
    communities: Sequence[Community],
    mentions: Sequence[tuple[str, str, int]],  # (entity, chunk id, count)
    edges: Sequence[tuple[str, str, float]],
    chunk_vectors: Mapping[str, Sequence[float]] | None = None,
) -> list[CommunityRecord]:
    """Records of these communities (children before parents) from rows (small graphs and tests);
    with `chunk_vectors` their profile vectors are set."""
    graph = CommunityGraph.of(edges, mentions)
    found = _hierarchy_of(communities, graph)
    records = [r for page in Profiles(found, graph).pages() for r in page]
    if chunk_vectors is not None:
        for r in records:
            r.vector = mean_vector([chunk_vectors[c] for c in r.vector_chunks if c in chunk_vectors])
    order = {c.id: n for n, c in enumerate(communities)}
    return sorted(records, key=lambda r: order[r.id])


def _hierarchy_of(communities: Sequence[Community], graph: CommunityGraph) -> Hierarchy:
    """The Hierarchy of given communities over `graph`'s nodes."""
    names = list(graph.names) + sorted({m for c in communities for m in c.members} - set(graph.names))
    node = {x: i for i, x in enumerate(names)}
    order = sorted(range(len(names)), key=names.__getitem__)
    rank = np.empty(len(names), dtype=np.int64)
    rank[np.asarray(order, dtype=np.int64)] = np.arange(len(names))
    found = Hierarchy(names, graph.edges, rank)
    levels = sorted({c.level for c in communities})
    index = {c.id: i for lv in levels for i, c in enumerate(x for x in communities if x.level == lv)}
    for lv in levels:
        at = [c for c in communities if c.level == lv]
        labels = np.full(len(names), -1, dtype=np.int32)
        for i, c in enumerate(at):
            labels[[node[m] for m in c.members]] = i
        found.labels.append(labels)
        found.ids.append([c.id for c in at])
        found.members.append([np.asarray(sorted((node[m] for m in c.members), key=rank.__getitem__)) for c in at])
        found.parents.append(np.asarray([index[c.parent] if c.parent else -1 for c in at], dtype=np.int32))
    return found
