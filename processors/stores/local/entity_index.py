"""Embedded entity index: label vectors in a SQLite file beside the triples, an exact-name index
for labels the question names, and an in-memory numpy matrix per collection for cosine search."""

from __future__ import annotations

import asyncio
import itertools
import json
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from processors.algorithms.entities import rank_entity_hits
from processors.algorithms.text_match import label_phrases, normalize
from processors.algorithms.vectors import ProjectedIndex, top_cosines
from processors.stores.protocol import EntityHit, VectorItem, VectorKind, VectorModel
from processors.stores.sqlite.pool import SqlitePool, delete_tenant_rows
from schemas.tenant import Tenant

SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (
    user TEXT NOT NULL, collection TEXT NOT NULL, iri TEXT NOT NULL,
    kind TEXT NOT NULL, label TEXT NOT NULL, vec BLOB NOT NULL,
    name TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (user, collection, iri)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS vectors_name ON vectors(user, collection, name);
CREATE TABLE IF NOT EXISTS scope_version (
    user TEXT NOT NULL, collection TEXT NOT NULL, version INTEGER NOT NULL,
    PRIMARY KEY (user, collection)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS vector_model (
    user TEXT NOT NULL, collection TEXT NOT NULL, model TEXT NOT NULL, dimensions INTEGER NOT NULL,
    PRIMARY KEY (user, collection)
) WITHOUT ROWID;
"""

# How long a collection's vectors are used before checking whether another process changed them.
VERSION_CHECK_S = 1.0
# Collections with more entities than this search a projection (approximate, nearly flat in
# size) in a worker thread (numpy releases the GIL); smaller ones search exactly, inline.
PROJECT_ABOVE = 20_000


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring an index written by an earlier version (FTS5 label table, no name column) up to date."""
    cols = [r[1] for r in conn.execute("PRAGMA table_info(vectors)")]
    if cols and "name" not in cols:
        conn.execute("ALTER TABLE vectors ADD COLUMN name TEXT NOT NULL DEFAULT ''")
        rows = conn.execute("SELECT user, collection, iri, label FROM vectors WHERE kind = 'entity'").fetchall()
        conn.executemany(
            "UPDATE vectors SET name = ? WHERE user = ? AND collection = ? AND iri = ?",
            [(normalize(label), u, c, i) for u, c, i, label in rows],
        )
    conn.execute("DROP TABLE IF EXISTS label_fts")


@dataclass
class _Matrix:
    version: int
    iris: list[str]  # entities first, then predicates
    labels: list[str]
    entities: int  # rows [0, entities) are entities
    vecs: np.ndarray  # unit rows
    pos: dict[str, int]  # iri → row
    projected: ProjectedIndex | None = None  # large collections: entity search via a projection

    @property
    def entity_matrix(self) -> np.ndarray:
        return self.vecs[: self.entities]


class LocalEntityIndex:
    """EntityIndex on SQLite + numpy: exact cosine up to PROJECT_ABOVE entities, a projection
    prefilter above (see vector_search)."""

    def __init__(self, path: Path) -> None:
        self.db = SqlitePool(path, SCHEMA, migrate=_migrate)
        self._cache: dict[tuple[str, str], _Matrix] = {}
        self._checked: dict[tuple[str, str], float] = {}  # when each collection's version was last read
        self._reload = asyncio.Lock()

    async def upsert(
        self, tenant: Tenant, items: Sequence[VectorItem], kind: VectorKind = "entity", *, model: str
    ) -> None:
        offered = VectorModel.of(items, model)
        rows = [
            (tenant.user, tenant.collection, iri, kind, label, np.asarray(v, dtype=np.float32).tobytes(),
             normalize(label) if kind == "entity" else "")
            for iri, label, v in items
        ]  # fmt: skip

        def write(conn: sqlite3.Connection) -> None:
            # the first write records the model; the check and the write are one transaction
            conn.execute(
                "INSERT OR IGNORE INTO vector_model VALUES (?, ?, ?, ?)",
                (tenant.user, tenant.collection, offered.name, offered.dimensions),
            )
            offered.require(tenant.collection, _vector_model(conn, tenant))
            conn.executemany("INSERT OR REPLACE INTO vectors VALUES (?,?,?,?,?,?,?)", rows)
            conn.execute(
                "INSERT INTO scope_version VALUES (?, ?, 1) ON CONFLICT(user, collection)"
                " DO UPDATE SET version = version + 1",
                (tenant.user, tenant.collection),
            )

        await self.db.write(write)
        self._checked.pop((tenant.user, tenant.collection), None)

    async def vector_model(self, tenant: Tenant) -> VectorModel | None:
        return await self.db.read(lambda c: _vector_model(c, tenant))

    async def _matrix(self, tenant: Tenant, version: int | None = None) -> _Matrix | None:
        """The collection's vectors, reloaded when another writer bumped its version (this
        process's writes drop the cache; another process's are seen within VERSION_CHECK_S)."""
        key = (tenant.user, tenant.collection)
        cached = self._cache.get(key)
        now = time.monotonic()
        if version is None and cached is not None and now - self._checked.get(key, 0.0) < VERSION_CHECK_S:
            return cached
        v = version if version is not None else await self.db.read(lambda c: _version(c, tenant))
        self._checked[key] = now
        if v == 0:
            return None
        async with self._reload:
            cached = self._cache.get(key)
            if cached is None or cached.version != v:
                cached = self._cache[key] = await self.db.read(lambda c: _load(c, tenant, v))
        return cached

    async def search(
        self, tenant: Tenant, vector: Sequence[float] | None, text: str | None, limit: int
    ) -> list[EntityHit]:
        phrases = label_phrases(text) if text else []

        def named(conn: sqlite3.Connection) -> tuple[int, list[tuple[str, str]]]:
            rows = []
            if phrases:
                rows = conn.execute(
                    "SELECT iri, label FROM vectors INDEXED BY vectors_name WHERE user = ? AND collection = ?"
                    " AND name IN (SELECT value FROM json_each(?)) AND kind = 'entity'",
                    (tenant.user, tenant.collection, json.dumps(phrases)),
                ).fetchall()
            return _version(conn, tenant), rows

        version, rows = await self.db.read(named)  # one round trip: the version and the named entities
        m = await self._matrix(tenant, version)
        if m is None:
            return []
        hits = {iri: EntityHit(iri, label, 1.0, lexical=True) for iri, label in rows}
        if vector is not None and m.entities:
            q = np.asarray(vector, dtype=np.float32)
            q = q / (np.linalg.norm(q) or 1.0)
            if m.projected is not None:
                top, sims = await asyncio.to_thread(m.projected.search, q, limit)
            else:
                top, sims = top_cosines(m.entity_matrix, q, limit)
            for i, s in zip(top, sims, strict=True):
                if m.iris[i] not in hits:
                    hits[m.iris[i]] = EntityHit(m.iris[i], m.labels[i], s)
        return rank_entity_hits(list(hits.values()), limit)

    async def nearest_predicates(self, tenant: Tenant, vector: Sequence[float], limit: int) -> list[EntityHit]:
        m = await self._matrix(tenant)
        if m is None or m.entities == len(m.iris) or limit <= 0:
            return []
        q = np.asarray(vector, dtype=np.float32)
        top, sims = top_cosines(m.vecs[m.entities :], q / (np.linalg.norm(q) or 1.0), limit)
        return [EntityHit(m.iris[m.entities + i], m.labels[m.entities + i], s) for i, s in zip(top, sims, strict=True)]

    async def vectors(self, tenant: Tenant, iris: Sequence[str]) -> dict[str, list[float]]:
        """Unit vectors of `iris`: from the loaded matrix while it is current (queries), else read
        by key (a load asks for a few after each of its writes; reloading the whole matrix each
        time made loading quadratic in the collection's size)."""
        key = (tenant.user, tenant.collection)
        m = self._cache.get(key)
        if m is not None and time.monotonic() - self._checked.get(key, -VERSION_CHECK_S) < VERSION_CHECK_S:
            return {i: m.vecs[m.pos[i]] for i in iris if i in m.pos}  # type: ignore[misc]
        sql = (
            "SELECT iri, vec FROM vectors WHERE user = ? AND collection = ? AND iri IN (SELECT value FROM json_each(?))"
        )
        args = (tenant.user, tenant.collection, json.dumps(list(dict.fromkeys(iris))))
        rows = await self.db.read(lambda c: c.execute(sql, args).fetchall())
        out: dict[str, list[float]] = {}
        for iri, blob in rows:
            v = np.frombuffer(blob, dtype=np.float32)
            out[str(iri)] = (v / (np.linalg.norm(v) or 1.0)).tolist()
        return out

    async def similarities(self, tenant: Tenant, vector: Sequence[float], iris: Sequence[str]) -> dict[str, float]:
        m = await self._matrix(tenant)
        if m is None or not iris:
            return {}
        at = [m.pos.get(i, -1) for i in iris]
        rows = np.fromiter(at, dtype=np.int64, count=len(at))
        hit = rows >= 0
        q = np.asarray(vector, dtype=np.float32)
        sims = m.vecs[rows[hit]] @ (q / (np.linalg.norm(q) or 1.0))
        return dict(zip(itertools.compress(iris, hit.tolist()), sims.tolist(), strict=True))

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
            conn.execute(
                "UPDATE scope_version SET version = version + 1 WHERE user = ? AND collection = ?",
                (tenant.user, tenant.collection),
            )

        await self.db.write(write)
        self._checked.pop((tenant.user, tenant.collection), None)

    async def collections(self, user: str) -> dict[str, int]:
        sql = "SELECT collection, count(*) FROM vectors WHERE user = ? AND kind = 'entity' GROUP BY collection"
        rows = await self.db.read(lambda c: c.execute(sql, (user,)).fetchall())
        return {str(c): int(n) for c, n in rows}

    async def delete_collection(self, tenant: Tenant) -> None:
        await self.db.write(lambda c: delete_tenant_rows(c, tenant, ("vectors", "scope_version", "vector_model")))
        self._cache.pop((tenant.user, tenant.collection), None)

    async def close(self) -> None:
        await self.db.close()


def _vector_model(conn: sqlite3.Connection, tenant: Tenant) -> VectorModel | None:
    sql = "SELECT model, dimensions FROM vector_model WHERE user = ? AND collection = ?"
    row = conn.execute(sql, (tenant.user, tenant.collection)).fetchone()
    return VectorModel(str(row[0]), int(row[1])) if row else None


def _version(conn: sqlite3.Connection, tenant: Tenant) -> int:
    r = conn.execute(
        "SELECT version FROM scope_version WHERE user = ? AND collection = ?", (tenant.user, tenant.collection)
    )
    row = r.fetchone()
    return int(row[0]) if row else 0


def _load(conn: sqlite3.Connection, tenant: Tenant, version: int) -> _Matrix:
    rows = conn.execute(
        "SELECT iri, label, vec FROM vectors WHERE user = ? AND collection = ? ORDER BY kind = 'predicate'",
        (tenant.user, tenant.collection),
    ).fetchall()
    entities = conn.execute(
        "SELECT count(*) FROM vectors WHERE user = ? AND collection = ? AND kind = 'entity'",
        (tenant.user, tenant.collection),
    ).fetchone()[0]
    iris = [r[0] for r in rows]
    vecs = np.zeros((0, 1), dtype=np.float32)
    if rows:
        vecs = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), -1).copy()
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        vecs /= np.where(norms == 0, 1, norms)
    projected = ProjectedIndex(vecs[:entities]) if entities > PROJECT_ABOVE else None
    return _Matrix(
        version, iris, [r[1] for r in rows], int(entities), vecs, {i: n for n, i in enumerate(iris)}, projected
    )
