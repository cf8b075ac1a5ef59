"""A collection's entity-to-entity edges held in memory for adjacency reads (the reranker's
breadth-first search), the way the local entity index holds its vectors.

Read from SQLite, a frontier of a few hundred entities costs two index range scans each (~15 ms
on this machine per level); in memory it is a few array slices. The arrays are rebuilt when the
collection's graph version (bumped in the same transaction as every triple write, by any process)
differs from the one they were read at, so a read never sees an edge that is gone or misses a new
one. A collection of more than `max_edges` triples is not held: its reads stay in SQL.
"""

from __future__ import annotations

import contextlib
import gc
import json
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from processors.algorithms.bfs import Distances, DistanceSearch
from processors.stores.sqlite.triple_ids import IRI, SCOPE
from schemas.tenant import Tenant

GRAPH_VERSION = """
CREATE TABLE IF NOT EXISTS graph_version (
    user TEXT NOT NULL, collection TEXT NOT NULL, version INTEGER NOT NULL, PRIMARY KEY (user, collection)
) WITHOUT ROWID;
"""
# Every edge but labels, as term ids (parameters: user, collection, the label predicate); put in
# key order by the terms' ranks in value order (`_read`), as `neighbours` scans them.
_EDGES = f"SELECT s, p, o FROM triples WHERE scope = {SCOPE} AND p IS NOT {IRI}"
# every term of the file in value order (the unique index, read alone), and its literal flag
_TERMS = "SELECT id, lit FROM terms INDEXED BY sqlite_autoindex_terms_1 ORDER BY value, lit, dt, lang"
_COUNT = f"SELECT count(*) FROM triples WHERE scope = {SCOPE}"


def bump_version(conn: sqlite3.Connection, tenant: Tenant) -> None:
    """Mark the collection's graph changed (call inside the writing transaction)."""
    conn.execute(
        "INSERT INTO graph_version VALUES (?, ?, 1) ON CONFLICT(user, collection) DO UPDATE SET version = version + 1",
        (tenant.user, tenant.collection),
    )


def graph_version(conn: sqlite3.Connection, tenant: Tenant) -> int:
    """The collection's graph version (0: never written since versions were kept)."""
    row = conn.execute(
        "SELECT version FROM graph_version WHERE user = ? AND collection = ?", (tenant.user, tenant.collection)
    )
    found = row.fetchone()
    return int(found[0]) if found else 0


@dataclass
class Adjacency:
    """One collection's edges as neighbour lists (CSR) over entity numbers, each entity's in key
    order; -1 stands for a literal object."""

    version: int
    names: list[str]  # entity number -> IRI
    ids: dict[str, int]
    out_ptr: np.ndarray
    out_to: np.ndarray
    in_ptr: np.ndarray
    in_from: np.ndarray

    def edges(self, entities: Sequence[str], per_entity: int) -> list[tuple[str, str]]:
        """(s, o) of the entity edges among the first `per_entity` out-edges of each entity, then
        among its first in-edges (out-edges of all entities first, as the SQL reads them)."""
        a, b = self._edges(self._numbers(list(dict.fromkeys(entities))), per_entity)
        names = self.names
        return [(names[x], names[y]) for x, y in zip(a.tolist(), b.tolist(), strict=True)]

    def distances(self, q: DistanceSearch) -> Distances:
        """`shortest_distances` over the held arrays: the same levels, edges, frontier order and
        truncation (tested equal), with numbers instead of an (s, o) pair per edge and the open
        results tracked as arrays. Returns the targets' hops."""
        # one more slot than entities: a target the graph does not hold points at it and stays -1
        # (an empty graph has no other slot to index)
        absent = len(self.names)
        hops = np.full(absent + 1, -1, np.int64)
        sources = list(dict.fromkeys(q.sources))
        unknown = {e for e in sources if e not in self.ids}  # hop 0, no edges
        hops[self._numbers(sources)] = 0
        members = [e for g in q.targets for e in g]
        group = np.repeat(np.arange(len(q.targets)), [len(g) for g in q.targets])
        member = np.array([self.ids.get(e, absent) for e in members], np.int64)
        given = np.zeros(len(members), bool)  # members that are sources the graph does not hold
        if unknown:
            given = np.fromiter((e in unknown for e in members), bool, len(members))

        non_empty = np.bincount(group, minlength=len(q.targets)) > 0

        def open_groups() -> np.ndarray:
            """The non-empty groups with no entity reached, in order."""
            closed = np.zeros(len(q.targets), bool)
            closed[group[given | (hops[member] >= 0)]] = True
            return np.flatnonzero(non_empty & ~closed)

        frontier: list[str] | np.ndarray = sources
        still, levels, truncated = open_groups(), 0, False
        pending: list[str] = []  # the last level's unreached targets (read backwards from them)
        for level in range(1, q.max_distance + 1):
            if not len(still) or not len(frontier):
                break
            reverse = False
            if level == q.max_distance:
                pending = list(dict.fromkeys(members[k] for k in np.flatnonzero(np.isin(group, still)).tolist()))
                reverse = len(pending) < len(frontier)
            ask = pending if reverse else frontier
            if len(ask) > q.max_frontier:
                ask, truncated = ask[: q.max_frontier], True
            numbers = self._numbers(ask)
            asked = np.zeros(len(self.names), bool)
            asked[numbers] = True
            a, b = self._edges(numbers, q.per_entity)
            levels += 1
            if reverse:  # the last level: which pending entities touch the frontier
                inside = np.zeros(len(self.names), bool)
                inside[self._numbers(frontier)] = True
                near = np.concatenate([a[asked[a] & inside[b]], b[asked[b] & inside[a]]])
                hops[near[hops[near] < 0]] = level
                break
            # far ends in edge order (each edge: its object, then its subject), first time seen
            far = np.stack([np.where(asked[a], b, -1), np.where(asked[b], a, -1)], axis=1).ravel()
            far = far[far >= 0]
            far = far[hops[far] < 0]
            _, first = np.unique(far, return_index=True)
            frontier = far[np.sort(first)]
            hops[frontier] = level
            still = open_groups()
        reached = hops[member] >= 0
        out = {members[k]: int(hops[member[k]]) for k in np.flatnonzero(reached).tolist()}
        return Distances({**out, **{e: 0 for e in members if e in unknown}}, levels, truncated)

    def _numbers(self, entities: Sequence[str] | np.ndarray) -> np.ndarray:
        """Entity numbers of `entities` (names, or numbers already), unknown names left out."""
        if isinstance(entities, np.ndarray):
            return entities
        return np.fromiter((i for e in entities if (i := self.ids.get(e)) is not None), np.int64)

    def _edges(self, asked: np.ndarray, per_entity: int) -> tuple[np.ndarray, np.ndarray]:
        """(subjects, objects) of the asked entities' first entity edges, in `edges`'s order."""
        out_owner, out_to = _gather(self.out_ptr, self.out_to, asked, per_entity)
        in_owner, in_from = _gather(self.in_ptr, self.in_from, asked, per_entity)
        a, b = np.concatenate([out_owner, in_from]), np.concatenate([out_to, in_owner])
        keep = b >= 0  # a literal object takes a place among the first edges but is no entity edge
        return a[keep], b[keep]


def _gather(ptr: np.ndarray, to: np.ndarray, rows: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, neighbour) for the first `n` neighbours of each of `rows`, rows in order (a
    vectorised slice of every row at once)."""
    starts = ptr[rows]
    lengths = np.minimum(ptr[rows + 1] - starts, n)
    total = int(lengths.sum())
    offsets = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(total)
    return np.repeat(rows, lengths), to[offsets]


def load_adjacency(conn: sqlite3.Connection, tenant: Tenant, label: str, max_edges: int) -> Adjacency | None:
    """The collection's edges at its current version (None when it holds more than `max_edges`
    triples: too big to hold)."""
    version = graph_version(conn, tenant)
    if conn.execute(_COUNT, (tenant.user, tenant.collection)).fetchone()[0] > max_edges:
        return None
    with _collector_paused():
        return _read(conn, tenant, label, version)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while a graph's rows are read: each collection would walk
    every row tuple read so far (a 1M-triple graph read in 6.5 s instead of 16.7 s)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _read(conn: sqlite3.Connection, tenant: Tenant, label: str, version: int) -> Adjacency:
    """The edges in key order: an entity's out-edges by predicate then object, its in-edges from
    entities by predicate then subject, each term ordered by its value (its rank among all terms);
    a literal object takes its place among an entity's first edges but is no entity edge.
    Entities are numbered in order of first appearance: out-edges' subjects, their objects, then
    in-edges' objects and subjects."""
    ranked = np.array(conn.execute(_TERMS).fetchall(), np.int64).reshape(-1, 2)
    rank = np.zeros(int(ranked[:, 0].max(initial=0)) + 1, np.int64)
    rank[ranked[:, 0]] = np.arange(len(ranked))
    literal = np.zeros(len(rank), bool)
    literal[ranked[:, 0]] = ranked[:, 1] != 0
    edges = np.array(conn.execute(_EDGES, (tenant.user, tenant.collection, label)).fetchall(), np.int64)
    s, p, o = edges.reshape(-1, 3).T
    out = np.lexsort((rank[o], rank[p], rank[s]))
    inward = np.flatnonzero(~literal[o])
    inward = inward[np.lexsort((rank[s[inward]], rank[p[inward]], rank[o[inward]]))]
    out_o = o[out]
    seen = np.concatenate([s[out], out_o[~literal[out_o]], o[inward], s[inward]])
    terms, first = np.unique(seen, return_index=True)
    entities = terms[np.argsort(first, kind="stable")]  # term ids by entity number
    number = np.full(len(rank), -1, np.int64)
    number[entities] = np.arange(len(entities))
    names = _values(conn, entities)
    n = len(names)
    out_s, out_to = number[s[out]], np.where(literal[out_o], -1, number[out_o])
    into, src = number[o[inward]], number[s[inward]]
    out_order, in_order = np.argsort(out_s, kind="stable"), np.argsort(into, kind="stable")  # keeps key order
    ids = {name: i for i, name in enumerate(names)}
    return Adjacency(version, names, ids, _pointers(out_s, n), out_to[out_order], _pointers(into, n), src[in_order])


def _values(conn: sqlite3.Connection, ids: np.ndarray) -> list[str]:
    """The values of these terms, in the same order."""
    sql = "SELECT t.value FROM json_each(?) j CROSS JOIN terms t ON t.id = j.value ORDER BY j.key"
    return [str(v) for (v,) in conn.execute(sql, (json.dumps(ids.tolist()),))]


def _pointers(keys: np.ndarray, n: int) -> np.ndarray:
    """CSR row pointers for rows grouped by `keys`."""
    return np.concatenate([[0], np.cumsum(np.bincount(keys, minlength=n))]).astype(np.int64)
