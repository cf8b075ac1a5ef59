"""Embedded triple store: one SQLite file (WAL; spo/pos/ops indexes; user/collection columns)."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

from processors.algorithms.bfs import Distances, DistanceSearch
from processors.algorithms.edges import NeighbourResult, RawEdge, edge_triple, rank_neighbours
from processors.stores.protocol import EntityIndex, LoadState
from processors.stores.sqlite.adjacency import GRAPH_VERSION, Adjacency, bump_version, graph_version, load_adjacency
from processors.stores.sqlite.pool import SqlitePool, delete_tenant_rows, has_table
from schemas.tenant import Tenant
from schemas.terms import RDFS_LABEL, Term, Triple
from schemas.triples import NeighboursQuery

LOAD_STATE = """
CREATE TABLE IF NOT EXISTS load_state (
    user TEXT NOT NULL, collection TEXT NOT NULL, started REAL NOT NULL, finished REAL,
    source TEXT NOT NULL DEFAULT '', triples INTEGER NOT NULL DEFAULT 0, vectors INTEGER NOT NULL DEFAULT 0,
    error TEXT, PRIMARY KEY (user, collection)
) WITHOUT ROWID;
"""
# The table is its spo index (WITHOUT ROWID): a rowid table beside a unique spo index held every
# triple twice (issue 38: a quarter of graph.db). Reads in spo order name it NOT INDEXED.
TRIPLES = """
CREATE TABLE IF NOT EXISTS triples (
    user TEXT NOT NULL, collection TEXT NOT NULL,
    s TEXT NOT NULL, p TEXT NOT NULL, o TEXT NOT NULL,
    o_lit INTEGER NOT NULL DEFAULT 0, o_dt TEXT NOT NULL DEFAULT '', o_lang TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (user, collection, s, p, o, o_lit, o_dt, o_lang)
) WITHOUT ROWID"""
SCHEMA = (
    LOAD_STATE
    + TRIPLES
    + """;
CREATE INDEX IF NOT EXISTS pos ON triples(user, collection, p, o);
CREATE INDEX IF NOT EXISTS ops ON triples(user, collection, o, o_lit, p, s);
CREATE TABLE IF NOT EXISTS labels (
    user TEXT NOT NULL, collection TEXT NOT NULL, iri TEXT NOT NULL, label TEXT NOT NULL,
    PRIMARY KEY (user, collection, iri)
) WITHOUT ROWID;
"""
)

_COLS = "s, p, o, o_lit, o_dt, o_lang"
_LOAD_COLS = "started, finished, source, triples, vectors, error"  # LoadState.row() order
# One entity's edges in key order (predicate, then far end), the order every backend reads them
# in; each statement is an index-only range scan (in-edges have IRI objects: no datatype, language).
_OUT = f"SELECT {_COLS} FROM triples NOT INDEXED WHERE user = ? AND collection = ? AND s = ?"
_IN = "SELECT s, p, o, 0, '', '' FROM triples INDEXED BY ops WHERE user = ? AND collection = ? AND o = ? AND o_lit = 0"
_NB_OUT = f"{_OUT} AND p != ? ORDER BY p, o, o_lit, o_dt, o_lang LIMIT ?"
_NB_IN = f"{_IN} AND p != ? ORDER BY p, s LIMIT ?"
_NB_OUT_FOCUS = f"{_OUT} AND p = ? ORDER BY o, o_lit, o_dt, o_lang LIMIT ?"
_NB_IN_FOCUS = f"{_IN} AND p = ? ORDER BY s LIMIT ?"
MAX_HELD_EDGES = 500_000  # held up to this many triples (reading 1M took 6.5 s and 265 MB here)


def _migrate(conn: sqlite3.Connection) -> None:
    """Drop what earlier versions indexed differently (in-edges were keyed (o, s), not (o, p, s));
    record collections loaded before loads were recorded as complete loads of unknown source."""
    conn.execute("DROP INDEX IF EXISTS osp")
    conn.executescript(GRAPH_VERSION)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    _rebuild_without_rowid(conn)
    if "triples" in tables and "load_state" not in tables:
        conn.execute(LOAD_STATE)
        conn.execute(
            "INSERT INTO load_state(user, collection, started, finished, source)"
            " SELECT DISTINCT user, collection, 0, 0, 'an earlier kgflow' FROM triples"
        )


def _rebuild_without_rowid(conn: sqlite3.Connection) -> None:
    """A triples table written before is a rowid table with a unique spo index: renamed, copied
    into the keyed table (its pos and ops indexes are made again by the schema), dropped. A copy a
    kill interrupted is finished at the next open (the renamed table is still there)."""
    row = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'triples'").fetchone()
    if row is not None and "WITHOUT ROWID" not in row[0].upper():
        conn.execute("ALTER TABLE triples RENAME TO triples_rowid")
        conn.execute(TRIPLES)
    if has_table(conn, "triples_rowid"):
        conn.execute(
            f"INSERT OR IGNORE INTO triples (user, collection, {_COLS}) SELECT user, collection, {_COLS}"
            " FROM triples_rowid"
        )
        conn.execute("DROP TABLE triples_rowid")  # with spo, pos and ops


def _obj_cols(t: Term) -> tuple[str, int, str, str]:
    return (t.value, 0 if t.is_iri else 1, t.datatype or "", t.language or "")


def _is_label(t: Triple) -> bool:
    return t.p.value == RDFS_LABEL and not t.o.is_iri


def _replace_labels(conn: sqlite3.Connection, tenant: Tenant, triples: Sequence[Triple]) -> list[Triple]:
    """`triples` with each IRI's label triples cut to the batch's last, and the IRI's stored label
    triples that differ from it deleted: the label is replaced, not added beside."""
    last = {t.s.value: t for t in triples if _is_label(t)}
    conn.executemany(
        "DELETE FROM triples WHERE user = ? AND collection = ? AND s = ? AND p = ? AND o_lit = 1 AND o != ?",
        [(tenant.user, tenant.collection, i, RDFS_LABEL, t.o.value) for i, t in last.items()],
    )
    keep = {id(t) for t in last.values()}
    return [t for t in triples if not _is_label(t) or id(t) in keep]


class SqliteTripleStore:
    """TripleStore on SQLite. With an entity index, neighbour queries can score edges."""

    def __init__(self, path: Path, entity_index: EntityIndex | None = None) -> None:
        self.db = SqlitePool(path, SCHEMA, migrate=_migrate)
        self.entity_index = entity_index
        self._held: dict[tuple[str, str], tuple[int, Adjacency | None]] = {}  # (version, adjacency or too big)
        self._holding = threading.Lock()  # one thread reads a collection's adjacency at a time

    async def add_triples(self, tenant: Tenant, triples: Sequence[Triple], replace_labels: bool = False) -> int:
        def write(conn: sqlite3.Connection) -> int:
            kept = triples
            if replace_labels:  # under the file's write lock: other processes' writers wait
                conn.execute("BEGIN IMMEDIATE")
                kept = _replace_labels(conn, tenant, triples)
            rows = [(tenant.user, tenant.collection, t.s.value, t.p.value, *_obj_cols(t.o)) for t in kept]
            labels = [(tenant.user, tenant.collection, t.s.value, t.o.value) for t in kept if _is_label(t)]
            before = conn.total_changes
            conn.executemany(f"INSERT OR IGNORE INTO triples(user, collection, {_COLS}) VALUES (?,?,?,?,?,?,?,?)", rows)
            stored = conn.total_changes - before  # new triples only, not the label rows below
            if stored:
                bump_version(conn, tenant)
            conn.executemany("INSERT OR REPLACE INTO labels VALUES (?,?,?,?)", labels)
            return stored

        return await self.db.write(write)

    async def pattern(self, tenant: Tenant, s: Term | None, p: Term | None, o: Term | None, limit: int) -> list[Triple]:
        where, args = ["user = ?", "collection = ?"], [tenant.user, tenant.collection]
        if s is not None:
            where.append("s = ?")
            args.append(s.value)
        if p is not None:
            where.append("p = ?")
            args.append(p.value)
        if o is not None:
            where.append("o = ? AND o_lit = ? AND o_dt = ? AND o_lang = ?")
            args.extend(_obj_cols(o))
        # Name the index: without statistics SQLite scans the (user, collection) prefix of spo (the
        # table's key: NOT INDEXED).
        index = "NOT INDEXED"
        if s is None and o is not None:
            index = "INDEXED BY ops"
        elif s is None and p is not None:
            index = "INDEXED BY pos"
        sql = f"SELECT {_COLS} FROM triples {index} WHERE {' AND '.join(where)} LIMIT ?"
        rows = await self.db.read(lambda c: c.execute(sql, (*args, limit)).fetchall())
        return [edge_triple(r) for r in rows]

    async def neighbours(self, q: NeighboursQuery) -> NeighbourResult:
        # One store call for the whole frontier: a short index range scan per entity (and focus
        # predicate), run back to back in the store's thread, which is cheaper than one statement
        # joining the frontier (that one fetches every row through the table).
        frontier = list(dict.fromkeys(q.entities))
        focus = [p for p in dict.fromkeys(q.focus) if p != RDFS_LABEL] if q.focus_limit > 0 else []
        out, into = q.direction in ("both", "out"), q.direction in ("both", "in")
        uc, limit, focus_limit = (q.user, q.collection), q.limit_per_entity, q.focus_limit

        def read(conn: sqlite3.Connection) -> list[tuple[RawEdge, str]]:
            found: list[tuple[RawEdge, str]] = []

            def scan(sql: str, e: str, *args: str | int) -> int:
                before = len(found)
                found.extend((r, e) for r in conn.execute(sql, (*uc, e, *args)))
                return len(found) - before

            # Focus reads only where the first read stopped at the limit: below it, every edge
            # of that entity and direction is already here (the result is the same, the reads fewer).
            full_out = [e for e in frontier if out and scan(_NB_OUT, e, RDFS_LABEL, limit) >= limit]
            full_in = [e for e in frontier if into and scan(_NB_IN, e, RDFS_LABEL, limit) >= limit]
            for e in full_out:
                for p in focus:
                    scan(_NB_OUT_FOCUS, e, p, focus_limit)
            for e in full_in:
                for p in focus:
                    scan(_NB_IN_FOCUS, e, p, focus_limit)
            return found

        found = await self.db.read(read)
        return await rank_neighbours(found, len(found), q, self.entity_index)

    async def adjacent(self, tenant: Tenant, entities: Sequence[str], limit_per_entity: int) -> list[tuple[str, str]]:
        """The IRI edges among the frontier's first edges (the scans of `neighbours`) as (s, o),
        out-edges first; from the adjacency held in memory at the collection's current graph
        version (see `sqlite_adjacency`)."""
        uc = (tenant.user, tenant.collection)

        def read(conn: sqlite3.Connection) -> list[tuple[str, str]]:
            held = self._adjacency(conn, tenant)
            if held is not None:
                return held.edges(entities, limit_per_entity)
            found: list[tuple[str, str]] = []
            for sql in (_NB_OUT, _NB_IN):
                for e in dict.fromkeys(entities):
                    rows = conn.execute(sql, (*uc, e, RDFS_LABEL, limit_per_entity))
                    found += [(s, o) for s, _, o, lit, _, _ in rows if not lit]
            return found

        return await self.db.read(read)

    async def distances(self, tenant: Tenant, search: DistanceSearch) -> Distances | None:
        """The whole breadth-first search over the held adjacency, in one read (None: too big to
        hold, search level by level)."""

        def read(conn: sqlite3.Connection) -> Distances | None:
            held = self._adjacency(conn, tenant)
            return None if held is None else held.distances(search)

        return await self.db.read(read)

    def _adjacency(self, conn: sqlite3.Connection, tenant: Tenant) -> Adjacency | None:
        """The collection's adjacency at its current version (None: too big to hold)."""
        version = graph_version(conn, tenant)
        held = self._held.get((tenant.user, tenant.collection))
        if held is None or held[0] != version:
            with self._holding:
                held = self._held.get((tenant.user, tenant.collection))
                if held is None or held[0] != version:
                    adjacency = load_adjacency(conn, tenant, RDFS_LABEL, MAX_HELD_EDGES)
                    held = self._held[tenant.user, tenant.collection] = (
                        adjacency.version if adjacency else version,
                        adjacency,
                    )
        return held[1]

    async def labels(self, tenant: Tenant, iris: Sequence[str]) -> dict[str, str]:
        sql = (
            "SELECT iri, label FROM labels WHERE user = ? AND collection = ?"
            " AND iri IN (SELECT value FROM json_each(?))"
        )
        args = (tenant.user, tenant.collection, json.dumps(list(iris)))
        rows = await self.db.read(lambda c: c.execute(sql, args).fetchall())
        return {str(i): str(label) for i, label in rows}

    async def remove_triples(self, tenant: Tenant, triples: Sequence[Triple]) -> None:
        rows = [(tenant.user, tenant.collection, t.s.value, t.p.value, *_obj_cols(t.o)) for t in triples]
        labels = [(tenant.user, tenant.collection, t.s.value, t.o.value) for t in triples if t.p.value == RDFS_LABEL]

        def write(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "DELETE FROM triples WHERE user = ? AND collection = ? AND s = ? AND p = ? AND o = ?"
                " AND o_lit = ? AND o_dt = ? AND o_lang = ?",
                rows,
            )
            conn.executemany("DELETE FROM labels WHERE user = ? AND collection = ? AND iri = ? AND label = ?", labels)
            bump_version(conn, tenant)

        await self.db.write(write)

    async def collections(self, user: str) -> dict[str, int]:
        sql = "SELECT collection, count(*) FROM triples NOT INDEXED WHERE user = ? GROUP BY collection"
        rows = await self.db.read(lambda c: c.execute(sql, (user,)).fetchall())
        return {str(c): int(n) for c, n in rows}

    async def delete_collection(self, tenant: Tenant) -> None:
        def write(conn: sqlite3.Connection) -> None:
            delete_tenant_rows(conn, tenant, ("triples", "labels", "load_state"))
            bump_version(conn, tenant)

        await self.db.write(write)

    async def load_state(self, tenant: Tenant) -> LoadState | None:
        sql = f"SELECT {_LOAD_COLS} FROM load_state WHERE user = ? AND collection = ?"
        row = await self.db.read(lambda c: c.execute(sql, (tenant.user, tenant.collection)).fetchone())
        return LoadState(*row) if row else None

    async def set_load_state(self, tenant: Tenant, state: LoadState) -> None:
        sql = f"INSERT OR REPLACE INTO load_state(user, collection, {_LOAD_COLS}) VALUES (?,?,?,?,?,?,?,?)"
        await self.db.write(lambda c: c.execute(sql, (tenant.user, tenant.collection, *state.row())))

    async def close(self) -> None:
        await self.db.close()
