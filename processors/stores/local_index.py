"""Embedded entity index: label vectors and FTS5 label search in a SQLite file beside the
triples, with an in-memory numpy matrix per collection for exact cosine search."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from processors.stores.protocol import EntityHit
from processors.stores.sqlite_pool import SqlitePool
from processors.stores.text_match import fts_query, label_match_score

SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (
    user TEXT NOT NULL, collection TEXT NOT NULL, iri TEXT NOT NULL,
    kind TEXT NOT NULL, label TEXT NOT NULL, vec BLOB NOT NULL,
    PRIMARY KEY (user, collection, iri)
) WITHOUT ROWID;
CREATE VIRTUAL TABLE IF NOT EXISTS label_fts USING fts5(
    label, user UNINDEXED, collection UNINDEXED, iri UNINDEXED, tokenize = 'unicode61'
);
CREATE TABLE IF NOT EXISTS scope_version (
    user TEXT NOT NULL, collection TEXT NOT NULL, version INTEGER NOT NULL,
    PRIMARY KEY (user, collection)
) WITHOUT ROWID;
"""

LEXICAL_CANDIDATES = 200


@dataclass
class _Matrix:
    version: int
    iris: list[str]
    labels: list[str]
    matrix: np.ndarray  # entities only, unit rows
    row: dict[str, np.ndarray]  # every iri (entities and predicates) → vector


class LocalEntityIndex:
    """EntityIndex on SQLite + numpy: exact cosine, fine up to a few hundred thousand entities."""

    def __init__(self, path: Path) -> None:
        self.db = SqlitePool(path, SCHEMA)
        self._cache: dict[tuple[str, str], _Matrix] = {}
        self._reload = asyncio.Lock()

    async def upsert(
        self,
        user: str,
        collection: str,
        items: Sequence[tuple[str, str, Sequence[float]]],
        kind: Literal["entity", "predicate"] = "entity",
    ) -> None:
        rows = [
            (user, collection, iri, kind, label, np.asarray(v, dtype=np.float32).tobytes()) for iri, label, v in items
        ]
        fts = [(label, user, collection, iri) for iri, label, _ in items if kind == "entity"]

        def write(conn: sqlite3.Connection) -> None:
            # Only IRIs indexed before can have a stale FTS row (the delete scans: FTS columns
            # other than the label are not indexed), so a fresh load deletes nothing.
            known = conn.execute(
                "SELECT iri FROM vectors WHERE user = ? AND collection = ? AND kind = 'entity'"
                " AND iri IN (SELECT value FROM json_each(?))",
                (user, collection, json.dumps([i for *_, i in fts])),
            ).fetchall()
            conn.executemany(
                "DELETE FROM label_fts WHERE user = ? AND collection = ? AND iri = ?",
                [(user, collection, i) for (i,) in known],
            )
            conn.executemany("INSERT OR REPLACE INTO vectors VALUES (?,?,?,?,?,?)", rows)
            conn.executemany("INSERT INTO label_fts(label, user, collection, iri) VALUES (?,?,?,?)", fts)
            conn.execute(
                "INSERT INTO scope_version VALUES (?, ?, 1) ON CONFLICT(user, collection)"
                " DO UPDATE SET version = version + 1",
                (user, collection),
            )

        await self.db.write(write)

    async def _matrix(self, user: str, collection: str) -> _Matrix | None:
        def version(conn: sqlite3.Connection) -> int:
            r = conn.execute(
                "SELECT version FROM scope_version WHERE user = ? AND collection = ?", (user, collection)
            ).fetchone()
            return int(r[0]) if r else 0

        v = await self.db.read(version)
        if v == 0:
            return None
        key = (user, collection)
        async with self._reload:
            cached = self._cache.get(key)
            if cached is None or cached.version != v:
                cached = self._cache[key] = await self.db.read(lambda c: _load(c, user, collection, v))
        return cached

    async def search(
        self, user: str, collection: str, vector: Sequence[float] | None, text: str | None, limit: int
    ) -> list[EntityHit]:
        m = await self._matrix(user, collection)
        if m is None:
            return []
        hits: dict[str, EntityHit] = {}
        if text and (q := fts_query(text)):
            sql = (
                "SELECT iri, label FROM label_fts WHERE label_fts MATCH ? AND user = ? AND collection = ?"
                " ORDER BY rank LIMIT ?"
            )
            rows = await self.db.read(lambda c: c.execute(sql, (q, user, collection, LEXICAL_CANDIDATES)).fetchall())
            for iri, label in rows:
                score = label_match_score(label, text)
                if score >= 1.0:
                    hits[iri] = EntityHit(iri, label, score, lexical=True)
        if vector is not None and len(m.iris):
            q = np.asarray(vector, dtype=np.float32)
            sims = m.matrix @ (q / (np.linalg.norm(q) or 1.0))
            k = min(limit, len(sims))
            top = np.argpartition(-sims, k - 1)[:k]
            for i in top[np.argsort(-sims[top])]:
                iri = m.iris[i]
                if iri not in hits:
                    hits[iri] = EntityHit(iri, m.labels[i], float(sims[i]))
        ranked = sorted(hits.values(), key=lambda h: (not h.lexical, -len(h.label) if h.lexical else 0, -h.score))
        return ranked[:limit]

    async def vectors(self, user: str, collection: str, iris: Sequence[str]) -> dict[str, list[float]]:
        m = await self._matrix(user, collection)
        if m is None:
            return {}
        return {i: m.row[i] for i in iris if i in m.row}  # type: ignore[misc]

    async def delete_collection(self, user: str, collection: str) -> None:
        def write(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM vectors WHERE user = ? AND collection = ?", (user, collection))
            conn.execute("DELETE FROM label_fts WHERE user = ? AND collection = ?", (user, collection))
            conn.execute("DELETE FROM scope_version WHERE user = ? AND collection = ?", (user, collection))

        await self.db.write(write)
        self._cache.pop((user, collection), None)

    async def close(self) -> None:
        await self.db.close()


def _load(conn: sqlite3.Connection, user: str, collection: str, version: int) -> _Matrix:
    rows = conn.execute(
        "SELECT iri, kind, label, vec FROM vectors WHERE user = ? AND collection = ?", (user, collection)
    ).fetchall()
    iris, labels, vecs, row = [], [], [], {}
    for iri, kind, label, blob in rows:
        v = np.frombuffer(blob, dtype=np.float32)
        row[iri] = v
        if kind == "entity":
            iris.append(iri)
            labels.append(label)
            vecs.append(v)
    matrix = np.vstack(vecs) if vecs else np.zeros((0, 1), dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True) if len(vecs) else 1.0
    return _Matrix(version, iris, labels, matrix / np.where(norms == 0, 1, norms), row)
