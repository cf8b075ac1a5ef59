"""Embedded triple store: one SQLite file (WAL), triples dictionary-encoded (`triple_ids`) and
keyed spo, with pos and ops indexes, each scoped by (user, collection)."""

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
from processors.stores.sqlite.pool import SqlitePool, delete_tenant_rows
from processors.stores.sqlite.triple_ids import (
    IRI,
    SCHEMA,
    SCOPE,
    TERM,
    TermKey,
    iri_key,
    migrate_text_layout,
    scope_id,
    term_ids,
    term_key,
)
from schemas.tenant import Tenant
from schemas.terms import RDFS_LABEL, Term, Triple
from schemas.triples import NeighboursQuery

_LOAD_COLS = "started, finished, source, triples, vectors, error"  # LoadState.row() order
# A triple's terms as a raw edge (s, p, o, o is a literal, o datatype, o language).
_EDGE = "s.value, p.value, o.value, o.lit, o.dt, o.lang"
# The triple joined to its terms, the triple first (CROSS JOIN keeps that order: scanning a
# term index to spare the sort would read every term of the file).
_JOINED = (
    "triples t {index} CROSS JOIN terms s ON s.id = t.s CROSS JOIN terms p ON p.id = t.p"
    " CROSS JOIN terms o ON o.id = t.o"
)
# One entity's edges in key order (predicate, then far end, by value), the order every backend
# reads them in: a range scan of the entity's keys, each row joined to its terms, sorted (ids are
# not in value order). Parameters: the entity (echoed), user, collection, the entity, a predicate.
_OUT = (
    "SELECT ?, p.value, o.value, o.lit, o.dt, o.lang FROM triples t NOT INDEXED"
    " CROSS JOIN terms p ON p.id = t.p CROSS JOIN terms o ON o.id = t.o"
    f" WHERE t.scope = {SCOPE} AND t.s = {IRI}"
)
_IN = (  # in-edges have IRI objects: no datatype, language
    "SELECT s.value, p.value, ?, 0, '', '' FROM triples t INDEXED BY ops"
    " CROSS JOIN terms p ON p.id = t.p CROSS JOIN terms s ON s.id = t.s"
    f" WHERE t.scope = {SCOPE} AND t.o = {IRI}"
)
_NB_OUT = f"{_OUT} AND t.p IS NOT {IRI} ORDER BY p.value, o.value, o.lit, o.dt, o.lang LIMIT ?"
_NB_IN = f"{_IN} AND t.p IS NOT {IRI} ORDER BY p.value, s.value LIMIT ?"
_NB_OUT_FOCUS = f"{_OUT} AND t.p = {IRI} ORDER BY o.value, o.lit, o.dt, o.lang LIMIT ?"
_NB_IN_FOCUS = f"{_IN} AND t.p = {IRI} ORDER BY s.value LIMIT ?"
MAX_HELD_EDGES = 500_000  # held up to this many triples (reading 1M took 6.5 s and 265 MB here)


def _migrate(conn: sqlite3.Connection) -> None:
    """Drop what earlier versions indexed differently (in-edges were keyed (o, s), not (o, p, s));
    copy a text-layout file into the encoded tables (`migrate_text_layout`)."""
    conn.execute("DROP INDEX IF EXISTS osp")
    conn.executescript(GRAPH_VERSION)
    migrate_text_layout(conn)


def _is_label(t: Triple) -> bool:
    return t.p.value == RDFS_LABEL and not t.o.is_iri


def _replace_labels(
    conn: sqlite3.Connection, scope: int, ids: dict[TermKey, int], triples: Sequence[Triple]
) -> list[Triple]:
    """`triples` with each IRI's label triples cut to the batch's last, and the IRI's stored label
    triples that differ from it deleted: the label is replaced, not added beside."""
    last = {t.s.value: t for t in triples if _is_label(t)}
    if not last:
        return list(triples)
    label = ids[(RDFS_LABEL, 0, "", "")]
    find = (
        "SELECT t.o FROM triples t CROSS JOIN terms o ON o.id = t.o"
        " WHERE t.scope = ? AND t.s = ? AND t.p = ? AND o.lit = 1 AND o.value != ?"
    )
    stale = [
        (scope, s, label, o)
        for t in last.values()
        for s in [ids[iri_key(t.s)]]
        for (o,) in conn.execute(find, (scope, s, label, t.o.value)).fetchall()
    ]
    conn.executemany("DELETE FROM triples WHERE scope = ? AND s = ? AND p = ? AND o = ?", stale)
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
            if replace_labels:  # under the file's write lock: other processes' writers wait
                conn.execute("BEGIN IMMEDIATE")
            scope = scope_id(conn, tenant)
            ids = term_ids(conn, (k for t in triples for k in (iri_key(t.s), iri_key(t.p), term_key(t.o))))
            kept = _replace_labels(conn, scope, ids, triples) if replace_labels else triples
            rows = [(scope, ids[iri_key(t.s)], ids[iri_key(t.p)], ids[term_key(t.o)]) for t in kept]
            labels = [(scope, ids[iri_key(t.s)], ids[term_key(t.o)]) for t in kept if _is_label(t)]
            before = conn.total_changes
            conn.executemany("INSERT OR IGNORE INTO triples(scope, s, p, o) VALUES (?, ?, ?, ?)", rows)
            stored = conn.total_changes - before  # new triples only, not the label rows below
            if stored:
                bump_version(conn, tenant)
            conn.executemany("INSERT OR REPLACE INTO labels(scope, iri, label) VALUES (?, ?, ?)", labels)
            return stored

        return await self.db.write(write)

    async def pattern(self, tenant: Tenant, s: Term | None, p: Term | None, o: Term | None, limit: int) -> list[Triple]:
        """Triples matching the pattern. With a subject or object named, in the key order of the
        text layout (a bounded sort: one entity's edges); a scan of a predicate or of the whole
        collection comes in id order (its callers ask whether any exists, or take all of it)."""
        where, args = [f"t.scope = {SCOPE}"], list[str | int]([tenant.user, tenant.collection])
        if s is not None:
            where.append(f"t.s = {IRI}")
            args.append(s.value)
        if p is not None:
            where.append(f"t.p = {IRI}")
            args.append(p.value)
        if o is not None:
            where.append(f"t.o = {TERM}")
            args.extend(term_key(o))
        # Name the index: without statistics SQLite may scan the scope's prefix of the wrong one.
        index, order = "NOT INDEXED", ""
        if s is not None:
            order = " ORDER BY p.value, o.value, o.lit, o.dt, o.lang"
        elif o is not None:
            index, order = "INDEXED BY ops", " ORDER BY p.value, s.value"
        elif p is not None:
            index = "INDEXED BY pos"
        sql = f"SELECT {_EDGE} FROM {_JOINED.format(index=index)} WHERE {' AND '.join(where)}{order} LIMIT ?"
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
                found.extend((r, e) for r in conn.execute(sql, (e, *uc, e, *args)))
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
                    rows = conn.execute(sql, (e, *uc, e, RDFS_LABEL, limit_per_entity))
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
            "SELECT i.value, t.value FROM labels l CROSS JOIN terms i ON i.id = l.iri"
            f" CROSS JOIN terms t ON t.id = l.label WHERE l.scope = {SCOPE} AND l.iri IN"
            " (SELECT id FROM terms WHERE value IN (SELECT value FROM json_each(?))"
            " AND lit = 0 AND dt = '' AND lang = '')"
            " ORDER BY i.value"
        )
        args = (tenant.user, tenant.collection, json.dumps(list(iris)))
        rows = await self.db.read(lambda c: c.execute(sql, args).fetchall())
        return {str(i): str(label) for i, label in rows}

    async def remove_triples(self, tenant: Tenant, triples: Sequence[Triple]) -> None:
        uc = (tenant.user, tenant.collection)
        rows = [(*uc, t.s.value, t.p.value, *term_key(t.o)) for t in triples]
        labels = [(*uc, t.s.value, t.o.value) for t in triples if t.p.value == RDFS_LABEL]

        def write(conn: sqlite3.Connection) -> None:
            delete = f"DELETE FROM triples WHERE scope = {SCOPE} AND s = {IRI} AND p = {IRI} AND o = {TERM}"
            conn.executemany(delete, rows)
            # a label row goes with a label triple of its text (whatever its language)
            conn.executemany(
                f"DELETE FROM labels WHERE scope = {SCOPE} AND iri = {IRI}"
                " AND label IN (SELECT id FROM terms WHERE value = ? AND lit = 1)",
                labels,
            )
            bump_version(conn, tenant)

        await self.db.write(write)

    async def collections(self, user: str) -> dict[str, int]:
        sql = (
            "SELECT c.collection, count(*) FROM scopes c CROSS JOIN triples t NOT INDEXED ON t.scope = c.id"
            " WHERE c.user = ? GROUP BY c.collection"
        )
        rows = await self.db.read(lambda c: c.execute(sql, (user,)).fetchall())
        return {str(c): int(n) for c, n in rows}

    async def delete_collection(self, tenant: Tenant) -> None:
        uc = (tenant.user, tenant.collection)

        def write(conn: sqlite3.Connection) -> None:
            conn.execute(f"DELETE FROM triples WHERE scope = {SCOPE}", uc)
            conn.execute(f"DELETE FROM labels WHERE scope = {SCOPE}", uc)
            conn.execute("DELETE FROM scopes WHERE user = ? AND collection = ?", uc)
            delete_tenant_rows(conn, tenant, ("load_state",))
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
