"""Embedded entity index: label vectors as int8 codes in the SQLite file's inverted lists
(vector_lists.py; spaces `entity` and `predicate` of each collection), searched from the file, and
an exact-name index for labels a question names.

A search of a small space scores all its codes, held in memory by the lists' own cache (at most
RESIDENT_MAX items a space); a larger one scores the nearest lists' codes until `PROBE` items, read from
the file. A lookup by IRI reads its rows by key. A float32 vector was 1,536 bytes, which SQLite keeps
on an overflow page of its own (4 KB a row on disk); a code is 384 bytes and a scale, inside the
row. An index written before (a float32 `vec` column) is converted once, on open."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from processors.algorithms.entities import rank_entity_hits
from processors.algorithms.text_match import label_phrases, normalize
from processors.stores.protocol import EntityHit, VectorItem, VectorKind, VectorModel
from processors.stores.sqlite.pool import SqlitePool, delete_tenant_rows
from processors.stores.sqlite.vector_lists import SCHEMA as VECTOR_LISTS_SCHEMA
from processors.stores.sqlite.vector_lists import VectorLists
from processors.stores.sqlite.vector_lists import migrate as migrate_vector_lists
from schemas.tenant import Tenant

# `vectors` keeps each IRI's kind, label and normalised name; its vector is in `vector_items`.
SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS vectors (
    user TEXT NOT NULL, collection TEXT NOT NULL, iri TEXT NOT NULL,
    kind TEXT NOT NULL, label TEXT NOT NULL, name TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (user, collection, iri)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS vectors_name ON vectors(user, collection, name);
CREATE TABLE IF NOT EXISTS vector_model (
    user TEXT NOT NULL, collection TEXT NOT NULL, model TEXT NOT NULL, dimensions INTEGER NOT NULL,
    PRIMARY KEY (user, collection)
) WITHOUT ROWID;
"""
    + VECTOR_LISTS_SCHEMA
)

SPACES: tuple[VectorKind, ...] = ("entity", "predicate")
# The collection's model record goes with its last vector (see Neo4j's FORGET_VECTOR_MODEL).
FORGET_MODEL = (
    "DELETE FROM vector_model WHERE user = ?1 AND collection = ?2"
    " AND NOT EXISTS (SELECT 1 FROM vectors WHERE user = ?1 AND collection = ?2)"
)
OLD_TABLE = "vectors_float32"  # an earlier index's table, renamed on open and converted
# Codes a search of a large space reads (the nearest lists first). Entity labels cluster less than
# chunks: on HotpotQA's 21.5k entities the lists find 0.92 of the exact top 10 reading the chunk
# index's 8,192, 0.99 reading 16,384.
PROBE = 16_384
CONVERT_BATCH = 8192  # rows converted at a time (the lists split as they grow, as in a load)
# A space of at most RESIDENT_MAX items is scored whole from its int8 codes, which the lists keep in
# memory (exact; 12 ms CPU at 21.5k; at most vector_lists.CACHED_SPACES spaces: 8 × 64k × 388 bytes,
# 200 MB at the most). Larger ones are searched from the file.
RESIDENT_MAX = 65_536


_LABELS = "SELECT iri, label FROM vectors WHERE user = ? AND collection = ? AND iri IN (SELECT value FROM json_each(?))"
_NAMED = (
    "SELECT iri, label FROM vectors INDEXED BY vectors_name WHERE user = ? AND collection = ?"
    " AND name IN (SELECT value FROM json_each(?)) AND kind = 'entity'"
)


def _migrate(conn: sqlite3.Connection) -> None:
    """Before the schema: set an earlier index's float32 table aside (LocalEntityIndex converts it)
    and drop what no longer exists (the FTS5 label table, the per-collection cache version); give
    the lists their stamps."""
    cols = [r[1] for r in conn.execute("PRAGMA table_info(vectors)")]
    if "vec" in cols:
        conn.execute("DROP INDEX IF EXISTS vectors_name")
        conn.execute("ALTER TABLE vectors RENAME TO vectors_float32")
    conn.execute("DROP TABLE IF EXISTS label_fts")
    conn.execute("DROP TABLE IF EXISTS scope_version")
    migrate_vector_lists(conn)


def _convert(conn: sqlite3.Connection, lists: VectorLists) -> None:
    """Move an earlier index's rows (float32 vectors), if any, into `vectors` and the int8 lists, in
    the caller's transaction."""
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (OLD_TABLE,)).fetchone():
        return
    rows = conn.execute("SELECT user, collection, kind, iri, label, vec FROM vectors_float32")  # key order
    while batch := rows.fetchmany(CONVERT_BATCH):
        groups: dict[tuple[str, str, VectorKind], list[tuple[str, str, np.ndarray]]] = {}
        for user, collection, kind, iri, label, vec in batch:
            groups.setdefault((user, collection, kind), []).append((iri, label, np.frombuffer(vec, np.float32)))
        for (user, collection, kind), items in groups.items():
            _write(conn, lists, Tenant(user, collection), items, kind)
    conn.execute("DROP TABLE vectors_float32")


def _write(
    conn: sqlite3.Connection, lists: VectorLists, tenant: Tenant,
    items: Sequence[tuple[str, str, np.ndarray]], kind: VectorKind,
) -> None:  # fmt: skip
    """Labels, names and int8 codes of `items` (the last of a repeated IRI wins)."""
    last = {iri: (label, vec) for iri, label, vec in items}
    conn.executemany(
        "INSERT OR REPLACE INTO vectors VALUES (?,?,?,?,?,?)",
        [(tenant.user, tenant.collection, iri, kind, label, normalize(label) if kind == "entity" else "")
         for iri, (label, _) in last.items()],
    )  # fmt: skip
    lists.remove(conn, tenant, "predicate" if kind == "entity" else "entity", list(last))  # a kind changed
    lists.add(conn, tenant, kind, [(iri, "", vec) for iri, (_, vec) in last.items()])


def _unit_query(vector: Sequence[float]) -> np.ndarray:
    q = np.asarray(vector, dtype=np.float32)
    return q / (np.linalg.norm(q) or 1.0)


class LocalEntityIndex:
    """EntityIndex on SQLite: int8 inverted lists for search, rows by key for lookups."""

    def __init__(self, path: Path) -> None:
        # Not mapped: a search reads a few lists of a file that may hold millions of entities, and
        # mapped pages would stay in the process's resident set.
        self.db = SqlitePool(path, SCHEMA, migrate=_migrate, mapped=False)
        self.lists = VectorLists()
        with self.db.writer() as conn:
            _convert(conn, self.lists)

    async def upsert(
        self, tenant: Tenant, items: Sequence[VectorItem], kind: VectorKind = "entity", *, model: str
    ) -> None:
        offered = VectorModel.of(items, model)
        rows = [(iri, label, np.asarray(v, dtype=np.float32)) for iri, label, v in items]

        def write(conn: sqlite3.Connection) -> None:
            # the first write records the model; the check and the write are one transaction
            conn.execute(
                "INSERT OR IGNORE INTO vector_model VALUES (?, ?, ?, ?)",
                (tenant.user, tenant.collection, offered.name, offered.dimensions),
            )
            offered.require(tenant.collection, _vector_model(conn, tenant))
            _write(conn, self.lists, tenant, rows, kind)

        await self.db.write(write)

    async def vector_model(self, tenant: Tenant) -> VectorModel | None:
        return await self.db.read(lambda c: _vector_model(c, tenant))

    async def search(
        self, tenant: Tenant, vector: Sequence[float] | None, text: str | None, limit: int
    ) -> list[EntityHit]:
        phrases = label_phrases(text) if text else []
        q = None if vector is None else _unit_query(vector)

        def read(conn: sqlite3.Connection) -> tuple[list[tuple[str, str]], list[tuple[str, str, float]]]:
            rows = []
            if phrases:
                rows = conn.execute(_NAMED, (tenant.user, tenant.collection, json.dumps(phrases))).fetchall()
            near = [] if q is None or limit <= 0 else self._nearest(conn, tenant, "entity", q, limit)
            return rows, self._labelled(conn, tenant, near)

        rows, near = await self.db.read(read)  # one round trip: the named entities and the nearest
        hits = {iri: EntityHit(iri, label, 1.0, lexical=True) for iri, label in rows}
        for iri, label, score in near:
            hits.setdefault(iri, EntityHit(iri, label, score))
        return rank_entity_hits(list(hits.values()), limit)

    async def nearest_predicates(self, tenant: Tenant, vector: Sequence[float], limit: int) -> list[EntityHit]:
        if limit <= 0:
            return []
        q = _unit_query(vector)
        found = await self.db.read(lambda c: self._labelled(c, tenant, self._nearest(c, tenant, "predicate", q, limit)))
        return [EntityHit(iri, label, score) for iri, label, score in found]

    async def vectors(self, tenant: Tenant, iris: Sequence[str]) -> dict[str, list[float]]:
        """Unit vectors of `iris` (dequantised from their int8 codes), read by key."""
        codes = await self.db.read(lambda c: self.lists.codes(c, tenant, SPACES, iris))
        return {iri: v.tolist() for iri, v in codes.items()}

    async def similarities(self, tenant: Tenant, vector: Sequence[float], iris: Sequence[str]) -> dict[str, float]:
        """Cosines to the dequantised vectors, as `search` scores them."""
        if not iris:
            return {}
        codes = await self.db.read(lambda c: self.lists.codes(c, tenant, SPACES, iris))
        if not codes:
            return {}
        known = [i for i in dict.fromkeys(iris) if i in codes]
        sims = np.stack([codes[i] for i in known]) @ _unit_query(vector)
        return dict(zip(known, sims.tolist(), strict=True))

    async def named(self, tenant: Tenant, names: Sequence[str]) -> dict[str, str]:
        sql = (
            "SELECT name, min(iri) FROM vectors INDEXED BY vectors_name WHERE user = ? AND collection = ?"
            " AND name IN (SELECT value FROM json_each(?)) AND kind = 'entity' GROUP BY name"
        )
        args = (tenant.user, tenant.collection, json.dumps(list(dict.fromkeys(names))))
        rows = await self.db.read(lambda c: c.execute(sql, args).fetchall())
        return {str(n): str(i) for n, i in rows}

    async def delete(self, tenant: Tenant, iris: Sequence[str]) -> None:
        def write(conn: sqlite3.Connection) -> None:
            conn.execute(
                "DELETE FROM vectors WHERE user = ? AND collection = ? AND iri IN (SELECT value FROM json_each(?))",
                (tenant.user, tenant.collection, json.dumps(list(iris))),
            )
            for space in SPACES:
                self.lists.remove(conn, tenant, space, list(iris))
            conn.execute(FORGET_MODEL, (tenant.user, tenant.collection))

        await self.db.write(write)

    async def collections(self, user: str) -> dict[str, int]:
        sql = "SELECT collection, count(*) FROM vectors WHERE user = ? AND kind = 'entity' GROUP BY collection"
        rows = await self.db.read(lambda c: c.execute(sql, (user,)).fetchall())
        return {str(c): int(n) for c, n in rows}

    async def delete_collection(self, tenant: Tenant) -> None:
        def write(conn: sqlite3.Connection) -> None:
            delete_tenant_rows(conn, tenant, ("vectors", "vector_model"))
            self.lists.drop(conn, tenant)

        await self.db.write(write)

    async def close(self) -> None:
        await self.db.close()

    def _nearest(
        self, conn: sqlite3.Connection, tenant: Tenant, space: str, q: np.ndarray, limit: int
    ) -> list[tuple[str, float]]:
        """(iri, cosine) of the `limit` nearest items: a small space's codes from memory (loaded
        again when its version moved: another writer's items are seen at once), a large one's lists."""
        return self.lists.search(conn, tenant, space, q, limit, probe=PROBE, whole_max=RESIDENT_MAX)

    @staticmethod
    def _labelled(
        conn: sqlite3.Connection, tenant: Tenant, found: list[tuple[str, float]]
    ) -> list[tuple[str, str, float]]:
        """(iri, label, score) of search results, best first."""
        if not found:
            return []
        args = (tenant.user, tenant.collection, json.dumps([i for i, _ in found]))
        labels = dict(conn.execute(_LABELS, args).fetchall())
        return [(iri, labels[iri], score) for iri, score in found if iri in labels]


def _vector_model(conn: sqlite3.Connection, tenant: Tenant) -> VectorModel | None:
    sql = "SELECT model, dimensions FROM vector_model WHERE user = ? AND collection = ?"
    row = conn.execute(sql, (tenant.user, tenant.collection)).fetchone()
    return VectorModel(str(row[0]), int(row[1])) if row else None
