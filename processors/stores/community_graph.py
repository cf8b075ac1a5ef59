"""What a community build reads of a collection, as arrays (`CommunityGraph`), and how a store
fills it a page of rows at a time (`GraphReader`): names are kept once in a list, every row
becomes integers, and no Python object per edge or mention outlives its page."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from processors.algorithms.leiden import Edges, undirected

PAGE = 50_000  # rows a store hands over at once
T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class Mentions:
    """Mention rows as parallel arrays: entity node id, chunk number, count."""

    entity: np.ndarray  # int32, into CommunityGraph.names
    chunk: np.ndarray  # int32, into CommunityGraph.chunks
    count: np.ndarray  # int32

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mentions) and all(
            np.array_equal(getattr(self, f), getattr(other, f)) for f in ("entity", "chunk", "count")
        )

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True)
class CommunityGraph:
    """A collection's concept graph: concept IRIs once (`names`, a node's id is its index),
    co-occurrence edges between node ids, merged per unordered pair (`undirected`; weight: chunks
    supporting the relations), chunk ids once, and the mentions."""

    names: list[str]
    edges: Edges
    chunks: list[str]
    mentions: Mentions

    @staticmethod
    def of(edges: Sequence[tuple[str, str, float]], mentions: Sequence[tuple[str, str, int]] = ()) -> CommunityGraph:
        """The graph of these rows (small graphs and tests)."""
        reader = GraphReader()
        reader.edges(edges)
        reader.mentions(mentions)
        return reader.graph()

    def edge_rows(self) -> list[tuple[str, str, float]]:
        """The edges as (s, o, weight) rows (small graphs and tests)."""
        n = self.names
        return [(n[a], n[b], w) for a, b, w in zip(self.edges.src.tolist(), self.edges.dst.tolist(),
                                                   self.edges.weight.tolist(), strict=True)]  # fmt: skip

    def mention_rows(self) -> list[tuple[str, str, int]]:
        """The mentions as (entity, chunk id, count) rows (small graphs and tests)."""
        m = self.mentions
        return [(self.names[e], self.chunks[c], k) for e, c, k in zip(m.entity.tolist(), m.chunk.tolist(),
                                                                        m.count.tolist(), strict=True)]  # fmt: skip


class GraphReader:
    """Builds a CommunityGraph from pages of (s, o, weight) and (entity, chunk id, count) rows."""

    def __init__(self) -> None:
        self._names: dict[str, int] = {}
        self._chunks: dict[str, int] = {}
        self._edges: list[Edges] = []
        self._mentions: list[np.ndarray] = []

    def edges(self, rows: Sequence[Sequence[object]]) -> None:
        """One page of (s, o, weight) rows."""
        ids = self._names
        src = [ids.setdefault(str(r[0]), len(ids)) for r in rows]
        dst = [ids.setdefault(str(r[1]), len(ids)) for r in rows]
        self._edges.append(Edges.of(src, dst, [r[2] for r in rows]))

    def mentions(self, rows: Sequence[Sequence[object]]) -> None:
        """One page of (entity, chunk id, count) rows."""
        ids, chunks = self._names, self._chunks
        page = np.empty((len(rows), 3), dtype=np.int32)
        page[:, 0] = [ids.setdefault(str(r[0]), len(ids)) for r in rows]
        page[:, 1] = [chunks.setdefault(str(r[1]), len(chunks)) for r in rows]
        page[:, 2] = [r[2] for r in rows]
        self._mentions.append(page)

    def graph(self) -> CommunityGraph:
        """The graph read so far."""
        m = np.concatenate(self._mentions) if self._mentions else np.empty((0, 3), dtype=np.int32)
        self._mentions = []
        mentions = Mentions(m[:, 0].copy(), m[:, 1].copy(), m[:, 2].copy())
        del m
        edges, self._edges = Edges.concat(self._edges), []
        return CommunityGraph(list(self._names), undirected(edges, len(self._names)), list(self._chunks), mentions)


def mean_vector(vectors: Sequence[Sequence[float]]) -> list[float]:
    """The unit-length mean of these vectors (a community's profile vector from its chunks'), or []."""
    if not len(vectors):
        return []
    m = np.mean(np.asarray(vectors, dtype=np.float32), axis=0)
    return (m / (np.linalg.norm(m) or 1.0)).tolist()  # type: ignore[no-any-return]


def pages(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """`items` in lists of at most `size` (consumed lazily)."""
    page: list[T] = []
    for item in items:
        page.append(item)
        if len(page) >= size:
            yield page
            page = []
    if page:
        yield page


def parent_hash(child_hashes: Iterable[str]) -> str:
    """The membership hash of a community above level 0: of its children's hashes (its members
    change exactly when a child's do, and an update recomputes it without reading every member)."""
    return hashlib.sha256(("^\0" + "\0".join(sorted(child_hashes))).encode()).hexdigest()[:16]


@dataclass
class CommunityRecord:
    """A community as stored: hierarchy, members, chunks, profile and vector."""

    id: str
    level: int
    parent: str | None
    children: list[str]
    members: list[str]
    chunks: dict[str, float]  # chunk id -> weight
    top_entities: list[str] = field(default_factory=list)
    top_chunks: list[str] = field(default_factory=list)
    vector: list[float] = field(default_factory=list)
    membership_hash: str = ""
    vector_chunks: list[str] = field(default_factory=list)  # no `vector`: the store makes it, their mean


@dataclass
class Stale:
    """What an update starts from: the stale level-0 communities, their ancestors, the pending concepts."""

    communities: dict[str, list[str]]  # stale level-0 community id -> its members
    ancestors: dict[str, list[str]]  # stale level-0 community id -> its ancestors' ids, level 1 up
    pending: list[str] = field(default_factory=list)  # concepts no community holds

    def touched(self) -> list[str]:
        """The concepts the update re-clusters."""
        return sorted({m for ms in self.communities.values() for m in ms} | set(self.pending))


@dataclass
class Change:
    """What an update writes: level-0 communities out and in, and each touched concept's ancestors."""

    removed: list[str]
    added: list[CommunityRecord]  # level 0, parent set; vectors from `vector_chunks` (the store)
    ancestors: dict[str, list[str]]  # touched concept -> its new ancestors' ids, level 1 up ([]: none)
