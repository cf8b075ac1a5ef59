"""A collection's entity-to-entity edges held in memory for adjacency reads (the reranker's
breadth-first search), the way the local entity index holds its vectors.

Read from SQLite, a frontier of a few hundred entities costs two index range scans each (~15 ms
on this machine per level); in memory it is a few array slices. The arrays are rebuilt when the
collection's graph version (bumped in the same transaction as every triple write, by any process)
differs from the one they were read at, so a read never sees an edge that is gone or misses a new
one. A collection of more than `max_edges` triples is not held: its reads stay in SQL.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

GRAPH_VERSION = """
CREATE TABLE IF NOT EXISTS graph_version (
    user TEXT NOT NULL, collection TEXT NOT NULL, version INTEGER NOT NULL, PRIMARY KEY (user, collection)
) WITHOUT ROWID;
"""
# Every edge but labels in key order (an entity's out-edges by predicate then object, its in-edges
# from entities by predicate then subject), as `neighbours` scans them: a literal object takes
# its place among an entity's first edges but is no entity edge.
_OUT_EDGES = (
    "SELECT s, o, o_lit FROM triples INDEXED BY spo WHERE user = ? AND collection = ? AND p != ?"
    " ORDER BY s, p, o, o_lit, o_dt, o_lang"
)
_IN_EDGES = (
    "SELECT o, s FROM triples INDEXED BY ops WHERE user = ? AND collection = ? AND o_lit = 0 AND p != ?"
    " ORDER BY o, p, s"
)
_COUNT = "SELECT count(*) FROM triples WHERE user = ? AND collection = ?"


def bump_version(conn: sqlite3.Connection, user: str, collection: str) -> None:
    """Mark the collection's graph changed (call inside the writing transaction)."""
    conn.execute(
        "INSERT INTO graph_version VALUES (?, ?, 1) ON CONFLICT(user, collection) DO UPDATE SET version = version + 1",
        (user, collection),
    )


def graph_version(conn: sqlite3.Connection, user: str, collection: str) -> int:
    """The collection's graph version (0: never written since versions were kept)."""
    row = conn.execute("SELECT version FROM graph_version WHERE user = ? AND collection = ?", (user, collection))
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
        nums = [i for e in dict.fromkeys(entities) if (i := self.ids.get(e)) is not None]
        names, out = self.names, []
        for i in nums:
            out += [(names[i], names[j]) for j in _first(self.out_ptr, self.out_to, i, per_entity) if j >= 0]
        for i in nums:
            out += [(names[j], names[i]) for j in _first(self.in_ptr, self.in_from, i, per_entity)]
        return out


def _first(ptr: np.ndarray, to: np.ndarray, i: int, n: int) -> list[int]:
    """The first `n` neighbours of entity `i` in a CSR."""
    start = int(ptr[i])
    return to[start : min(start + n, int(ptr[i + 1]))].tolist()  # type: ignore[no-any-return]


def load_adjacency(
    conn: sqlite3.Connection, user: str, collection: str, label: str, max_edges: int
) -> Adjacency | None:
    """The collection's edges at its current version (None when it holds more than `max_edges`
    triples: too big to hold)."""
    version = graph_version(conn, user, collection)
    if conn.execute(_COUNT, (user, collection)).fetchone()[0] > max_edges:
        return None
    ids: dict[str, int] = {}
    out_rows = conn.execute(_OUT_EDGES, (user, collection, label)).fetchall()
    s = np.fromiter((ids.setdefault(r[0], len(ids)) for r in out_rows), np.int64, len(out_rows))
    o = np.fromiter((-1 if r[2] else ids.setdefault(r[1], len(ids)) for r in out_rows), np.int64, len(out_rows))
    in_rows = conn.execute(_IN_EDGES, (user, collection, label)).fetchall()
    into = np.fromiter((ids.setdefault(r[0], len(ids)) for r in in_rows), np.int64, len(in_rows))
    src = np.fromiter((ids.setdefault(r[1], len(ids)) for r in in_rows), np.int64, len(in_rows))
    n = len(ids)
    out_order, in_order = np.argsort(s, kind="stable"), np.argsort(into, kind="stable")  # keeps key order
    return Adjacency(version, list(ids), ids, _pointers(s, n), o[out_order], _pointers(into, n), src[in_order])


def _pointers(keys: np.ndarray, n: int) -> np.ndarray:
    """CSR row pointers for rows grouped by `keys`."""
    return np.concatenate([[0], np.cumsum(np.bincount(keys, minlength=n))]).astype(np.int64)
