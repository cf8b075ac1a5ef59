"""Embedded document store: documents, chunks (text, offsets, vectors), chunk-entity mentions,
relation provenance and concept ownership in one SQLite file (`docs.db`), plus an in-memory
search index per collection (see chunk_index). Every query is scoped by user and collection,
and a request's scope (documents, metadata) is a predicate inside it."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from processors.stores.chunk_index import ChunkIndex, SearchMode
from processors.stores.documents_protocol import DocumentRecord, RemovedLinks, ScopeSql, scope_params
from processors.stores.sqlite_pool import SqlitePool
from schemas.documents import Chunk, DocumentInfo, Mention, Scope

SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    user TEXT NOT NULL, collection TEXT NOT NULL, id TEXT NOT NULL, title TEXT NOT NULL,
    timestamp REAL, metadata TEXT NOT NULL, content_hash TEXT NOT NULL, chunks INTEGER NOT NULL,
    PRIMARY KEY (user, collection, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS doc_meta (
    user TEXT NOT NULL, collection TEXT NOT NULL, document_id TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
    PRIMARY KEY (user, collection, document_id, key, value)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS chunks (
    user TEXT NOT NULL, collection TEXT NOT NULL, id TEXT NOT NULL, document_id TEXT NOT NULL,
    ordinal INTEGER NOT NULL, text TEXT NOT NULL, start INTEGER NOT NULL, end INTEGER NOT NULL,
    tokens INTEGER NOT NULL, vec BLOB NOT NULL,
    PRIMARY KEY (user, collection, id)
);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(user, collection, document_id);
CREATE TABLE IF NOT EXISTS mentions (
    user TEXT NOT NULL, collection TEXT NOT NULL, entity TEXT NOT NULL, chunk_id TEXT NOT NULL,
    document_id TEXT NOT NULL, count INTEGER NOT NULL,
    PRIMARY KEY (user, collection, entity, chunk_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS mentions_chunk ON mentions(user, collection, chunk_id, entity);
CREATE INDEX IF NOT EXISTS mentions_doc ON mentions(user, collection, document_id);
CREATE TABLE IF NOT EXISTS relation_sources (
    user TEXT NOT NULL, collection TEXT NOT NULL, s TEXT NOT NULL, p TEXT NOT NULL, o TEXT NOT NULL,
    chunk_id TEXT NOT NULL, document_id TEXT NOT NULL,
    PRIMARY KEY (user, collection, s, p, o, chunk_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS relation_sources_doc ON relation_sources(user, collection, document_id);
CREATE INDEX IF NOT EXISTS relation_sources_o ON relation_sources(user, collection, o, p, s);
CREATE TABLE IF NOT EXISTS concepts (
    user TEXT NOT NULL, collection TEXT NOT NULL, iri TEXT NOT NULL, owned INTEGER NOT NULL,
    PRIMARY KEY (user, collection, iri)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS docs_version (
    user TEXT NOT NULL, collection TEXT NOT NULL, version INTEGER NOT NULL,
    PRIMARY KEY (user, collection)
) WITHOUT ROWID;
"""

# The documents of a collection inside a scope: ?3 a JSON array of ids (or null), ?4 a JSON
# object {key: [JSON-encoded values]} (or null); every key must match one of its values.
SCOPED_DOCS = """
SELECT d.id FROM documents d WHERE d.user = ?1 AND d.collection = ?2
  AND (?3 IS NULL OR d.id IN (SELECT value FROM json_each(?3)))
  AND (?4 IS NULL OR NOT EXISTS (
    SELECT 1 FROM json_each(?4) f WHERE NOT EXISTS (
      SELECT 1 FROM doc_meta m, json_each(f.value) v
      WHERE m.user = d.user AND m.collection = d.collection AND m.document_id = d.id
        AND m.key = f.key AND m.value = v.value)))
"""
_CHUNK_COLS = "c.id, c.document_id, c.ordinal, c.text, c.start, c.end, c.tokens, d.title"
GET_CHUNKS = (
    "SELECT " + _CHUNK_COLS + " FROM chunks c JOIN documents d ON d.user = c.user AND d.collection = c.collection"
    " AND d.id = c.document_id WHERE c.user = ? AND c.collection = ? AND c.id IN (SELECT value FROM json_each(?))"
)
# Links of a neighbourhood: chunks mentioning the entities (at most ?4 per entity, most
# mentions first), and what the given chunks mention. ?5: JSON array of allowed documents or null.
ENTITY_LINKS = """
SELECT entity, chunk_id, count FROM (
  SELECT m.entity, m.chunk_id, m.count,
         row_number() OVER (PARTITION BY m.entity ORDER BY m.count DESC, m.chunk_id) AS n
  FROM mentions m WHERE m.user = ?1 AND m.collection = ?2 AND m.entity IN (SELECT value FROM json_each(?3))
    AND (?5 IS NULL OR m.document_id IN (SELECT value FROM json_each(?5))))
WHERE n <= ?4
"""
CHUNK_LINKS = """
SELECT m.entity, m.chunk_id, m.count FROM mentions m INDEXED BY mentions_chunk
WHERE m.user = ?1 AND m.collection = ?2 AND m.chunk_id IN (SELECT value FROM json_each(?3))
  AND (?4 IS NULL OR m.document_id IN (SELECT value FROM json_each(?4)))
"""
RELATION_HAS_SOURCE = (
    "SELECT 1 FROM relation_sources WHERE user = ? AND collection = ? AND s = ? AND p = ? AND o = ? LIMIT 1"
)
CONCEPT_MENTIONED = "SELECT 1 FROM mentions WHERE user = ? AND collection = ? AND entity = ? LIMIT 1"
CONCEPT_OWNED = "SELECT owned FROM concepts WHERE user = ? AND collection = ? AND iri = ?"
DELETE_CONCEPT = "DELETE FROM concepts WHERE user = ? AND collection = ? AND iri = ?"
RELATIONS_AMONG = """
SELECT s, p, o, count(DISTINCT chunk_id) AS w FROM relation_sources
WHERE user = ?1 AND collection = ?2
  AND s IN (SELECT value FROM json_each(?3)) AND o IN (SELECT value FROM json_each(?3))
  AND (?4 IS NULL OR document_id IN (SELECT value FROM json_each(?4)))
GROUP BY s, p, o ORDER BY w DESC, s, o LIMIT ?5
"""
SCOPED_ENTITIES = """
SELECT DISTINCT entity FROM mentions INDEXED BY mentions_doc
WHERE user = ?1 AND collection = ?2 AND document_id IN (SELECT value FROM json_each(?3))
"""
# Relation edges of one entity with a source chunk in the scope, in key order (predicate, far end).
SCOPED_OUT = """
SELECT DISTINCT s, p, o FROM relation_sources WHERE user = ?1 AND collection = ?2 AND s = ?3
  AND document_id IN (SELECT value FROM json_each(?4)) ORDER BY p, o LIMIT ?5
"""
SCOPED_IN = """
SELECT DISTINCT s, p, o FROM relation_sources INDEXED BY relation_sources_o WHERE user = ?1 AND collection = ?2
  AND o = ?3 AND document_id IN (SELECT value FROM json_each(?4)) ORDER BY p, s LIMIT ?5
"""
VERSION_CHECK_S = 1.0


class SqliteDocumentStore:
    """DocumentStore on SQLite (see module docstring)."""

    def __init__(self, path: Path) -> None:
        self.db = SqlitePool(path, SCHEMA)
        self._index: dict[tuple[str, str], ChunkIndex] = {}
        self._checked: dict[tuple[str, str], float] = {}
        self._reload = asyncio.Lock()

    # --- writes -------------------------------------------------------------------------------
    async def store(self, user: str, collection: str, records: Sequence[DocumentRecord]) -> RemovedLinks:
        """Write documents (replacing earlier versions of the same ids) in one transaction; returns
        what the replaced versions linked that nothing links any more."""

        def write(conn: sqlite3.Connection) -> RemovedLinks:
            removed = _delete_docs(conn, user, collection, [r.document.id for r in records])
            for r in records:
                _insert_record(conn, user, collection, r)
            _bump(conn, user, collection)
            return _unlinked(conn, user, collection, removed)

        out = await self.db.write(write)
        self._checked.pop((user, collection), None)
        return out

    async def delete_documents(self, user: str, collection: str, ids: Sequence[str]) -> RemovedLinks:
        """Delete documents; returns the relations and owned concepts nothing links any more."""

        def write(conn: sqlite3.Connection) -> RemovedLinks:
            removed = _delete_docs(conn, user, collection, list(ids))
            _bump(conn, user, collection)
            return _unlinked(conn, user, collection, removed)

        out = await self.db.write(write)
        self._checked.pop((user, collection), None)
        return out

    async def delete_collection(self, user: str, collection: str) -> None:
        """Drop every row of the collection."""

        def write(conn: sqlite3.Connection) -> None:
            for table in ("documents", "doc_meta", "chunks", "mentions", "relation_sources", "concepts"):
                conn.execute("DELETE FROM " + table + " WHERE user = ? AND collection = ?", (user, collection))
            _bump(conn, user, collection)

        await self.db.write(write)
        self._index.pop((user, collection), None)

    # --- reads --------------------------------------------------------------------------------
    async def hashes(self, user: str, collection: str, ids: Sequence[str]) -> dict[str, str]:
        """Content hash of each stored document of `ids`."""
        sql = (
            "SELECT id, content_hash FROM documents WHERE user = ? AND collection = ?"
            " AND id IN (SELECT value FROM json_each(?))"
        )
        rows = await self.db.read(lambda c: c.execute(sql, (user, collection, json.dumps(list(ids)))).fetchall())
        return {str(i): str(h) for i, h in rows}

    async def search(
        self,
        user: str,
        collection: str,
        vector: Sequence[float] | None,
        text: str | None,
        mode: SearchMode,
        limit: int,
        scope: Scope | None = None,
    ) -> list[Chunk]:
        """The best chunks of the scope by vector and/or text (one store call)."""
        allowed = await self._allowed(user, collection, scope)
        index = await self._chunk_index(user, collection)
        if index is None or (allowed is not None and not allowed):
            return []
        hits = await asyncio.to_thread(index.search, vector, text, mode, limit, index.mask(allowed))
        found = {c.id: c for c in await self.chunks(user, collection, [index.ids[i] for i, _ in hits])}
        return [found[index.ids[i]].model_copy(update={"score": s}) for i, s in hits if index.ids[i] in found]

    async def chunks(self, user: str, collection: str, ids: Sequence[str], scope: Scope | None = None) -> list[Chunk]:
        """Chunks by id (in the scope), in the order asked."""
        if not ids:
            return []

        def read(conn: sqlite3.Connection) -> list[Chunk]:
            allowed = scoped_ids(conn, user, collection, scope)
            rows = conn.execute(GET_CHUNKS, (user, collection, json.dumps(list(ids)))).fetchall()
            by_id = {r[0]: r for r in rows if allowed is None or r[1] in allowed}
            return [_chunk(by_id[i]) for i in dict.fromkeys(ids) if i in by_id]

        return await self.db.read(read)

    async def links(
        self,
        user: str,
        collection: str,
        entities: Sequence[str],
        chunk_ids: Sequence[str],
        per_entity: int,
        scope: Scope | None = None,
    ) -> list[Mention]:
        """Chunk-entity links of a neighbourhood in one store call (see `ENTITY_LINKS`)."""

        def read(conn: sqlite3.Connection) -> list[Mention]:
            allowed = scoped_ids(conn, user, collection, scope)
            docs = None if allowed is None else json.dumps(sorted(allowed))
            rows: list[tuple[str, str, int]] = []
            if entities:
                args = (user, collection, json.dumps(list(entities)), per_entity, docs)
                rows += conn.execute(ENTITY_LINKS, args).fetchall()
            if chunk_ids:
                rows += conn.execute(CHUNK_LINKS, (user, collection, json.dumps(list(chunk_ids)), docs)).fetchall()
            return [Mention(entity=e, chunk_id=c, count=n) for e, c, n in dict.fromkeys(rows)]

        return await self.db.read(read)

    async def relations(
        self, user: str, collection: str, entities: Sequence[str], limit: int, scope: Scope | None = None
    ) -> list[tuple[str, str, str, int]]:
        """Relations among `entities` with their in-scope support (chunks), strongest first."""

        def read(conn: sqlite3.Connection) -> list[tuple[str, str, str, int]]:
            allowed = scoped_ids(conn, user, collection, scope)
            docs = None if allowed is None else json.dumps(sorted(allowed))
            return conn.execute(RELATIONS_AMONG, (user, collection, json.dumps(list(entities)), docs, limit)).fetchall()

        return await self.db.read(read)

    async def scoped_entities(self, user: str, collection: str, scope: Scope) -> set[str]:
        """Entities a chunk in the scope mentions."""

        def read(conn: sqlite3.Connection) -> set[str]:
            allowed = scoped_ids(conn, user, collection, scope)
            if allowed is None:
                raise ValueError("scoped_entities needs a scope that narrows")
            args = (user, collection, json.dumps(sorted(allowed)))
            return {r[0] for r in conn.execute(SCOPED_ENTITIES, args)}

        return await self.db.read(read)

    async def scoped_neighbours(
        self, user: str, collection: str, entities: Sequence[str], limit_per_entity: int, scope: Scope
    ) -> list[tuple[tuple[str, str, str, int, str, str], str]]:
        """Relation edges touching `entities` with a source chunk in the scope: (raw edge, the
        entity it was found from), out-edges first, each entity's in key order."""

        def read(conn: sqlite3.Connection) -> list[tuple[tuple[str, str, str, int, str, str], str]]:
            allowed = scoped_ids(conn, user, collection, scope)
            docs = json.dumps(sorted(allowed or ()))
            found = []
            for sql in (SCOPED_OUT, SCOPED_IN):
                for e in dict.fromkeys(entities):
                    rows = conn.execute(sql, (user, collection, e, docs, limit_per_entity))
                    found += [((s_, p_, o_, 0, "", ""), e) for s_, p_, o_ in rows]
            return found

        return await self.db.read(read)

    async def documents(self, user: str, collection: str, limit: int, scope: Scope | None = None) -> list[DocumentInfo]:
        """Documents in id order."""

        def read(conn: sqlite3.Connection) -> list[DocumentInfo]:
            allowed = scoped_ids(conn, user, collection, scope)
            rows = conn.execute(
                "SELECT id, title, chunks, content_hash, timestamp FROM documents"
                " WHERE user = ? AND collection = ? ORDER BY id",
                (user, collection),
            ).fetchall()
            picked = [r for r in rows if allowed is None or r[0] in allowed][:limit]
            return [DocumentInfo(id=i, title=t, chunks=n, content_hash=h, timestamp=ts) for i, t, n, h, ts in picked]

        return await self.db.read(read)

    async def counts(self, user: str) -> dict[str, tuple[int, int]]:
        """Collection -> (documents, chunks) for the user's collections that hold documents."""

        def read(conn: sqlite3.Connection) -> dict[str, tuple[int, int]]:
            rows = conn.execute(
                "SELECT collection, count(*), coalesce(sum(chunks), 0) FROM documents WHERE user = ?"
                " GROUP BY collection",
                (user,),
            ).fetchall()
            return {c: (int(d), int(n)) for c, d, n in rows}

        return await self.db.read(read)

    async def close(self) -> None:
        """Release connections."""
        await self.db.close()

    # --- internals ----------------------------------------------------------------------------
    async def _allowed(self, user: str, collection: str, scope: Scope | None) -> set[str] | None:
        if scope is None or scope.is_empty:
            return None
        return await self.db.read(lambda c: scoped_ids(c, user, collection, scope))

    async def _chunk_index(self, user: str, collection: str) -> ChunkIndex | None:
        """The collection's search index, rebuilt when the store's version moved (another
        process's writes are seen within VERSION_CHECK_S)."""
        key = (user, collection)
        cached, now = self._index.get(key), time.monotonic()
        if cached is not None and now - self._checked.get(key, 0.0) < VERSION_CHECK_S:
            return cached
        version = await self.db.read(lambda c: _version(c, user, collection))
        self._checked[key] = now
        if version == 0:
            return None
        async with self._reload:
            cached = self._index.get(key)
            if cached is None or cached.version != version:
                cached = self._index[key] = await self.db.read(lambda c: _build_index(c, user, collection, version))
        return cached


def scoped_ids(conn: sqlite3.Connection, user: str, collection: str, scope: Scope | None) -> set[str] | None:
    """The documents of the scope (None: no narrower scope than the collection)."""
    if scope is None or scope.is_empty:
        return None
    sql: ScopeSql = scope_params(scope)
    return {r[0] for r in conn.execute(SCOPED_DOCS, (user, collection, sql.document_ids, sql.metadata))}


def _chunk(r: tuple) -> Chunk:  # type: ignore[type-arg]
    cid, doc, ordinal, text, start, end, tokens, title = r
    return Chunk(id=cid, document_id=doc, ordinal=ordinal, text=text, start=start, end=end, tokens=tokens, title=title)


def _version(conn: sqlite3.Connection, user: str, collection: str) -> int:
    row = conn.execute(
        "SELECT version FROM docs_version WHERE user = ? AND collection = ?", (user, collection)
    ).fetchone()
    return int(row[0]) if row else 0


def _bump(conn: sqlite3.Connection, user: str, collection: str) -> None:
    conn.execute(
        "INSERT INTO docs_version VALUES (?, ?, 1) ON CONFLICT(user, collection) DO UPDATE SET version = version + 1",
        (user, collection),
    )


def _build_index(conn: sqlite3.Connection, user: str, collection: str, version: int) -> ChunkIndex:
    rows = conn.execute(
        "SELECT id, document_id, text, vec FROM chunks WHERE user = ? AND collection = ? ORDER BY id",
        (user, collection),
    ).fetchall()
    vecs = (
        np.frombuffer(b"".join(r[3] for r in rows), dtype=np.float32).reshape(len(rows), -1)
        if rows
        else np.zeros((0, 1), dtype=np.float32)
    )
    return ChunkIndex.build(version, [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], vecs)


def _insert_record(conn: sqlite3.Connection, user: str, collection: str, r: DocumentRecord) -> None:
    d = r.document
    ts = d.timestamp.timestamp() if d.timestamp else None
    conn.execute(
        "INSERT INTO documents VALUES (?,?,?,?,?,?,?,?)",
        (user, collection, d.id, d.title, ts, json.dumps(d.metadata), r.content_hash, len(r.chunks)),
    )
    meta = [(user, collection, d.id, k, json.dumps(v)) for k, vs in d.metadata.items() for v in _as_list(vs)]
    conn.executemany("INSERT OR IGNORE INTO doc_meta VALUES (?,?,?,?,?)", meta)
    conn.executemany(
        "INSERT INTO chunks VALUES (?,?,?,?,?,?,?,?,?,?)",
        [
            (user, collection, c.id, d.id, c.ordinal, c.text, c.start, c.end, c.tokens,
             np.asarray(v, dtype=np.float32).tobytes())
            for c, v in zip(r.chunks, r.vectors, strict=True)
        ],
    )  # fmt: skip
    conn.executemany(
        "INSERT INTO mentions VALUES (?,?,?,?,?,?) ON CONFLICT DO UPDATE SET count = count + excluded.count",
        [(user, collection, m.entity, m.chunk_id, d.id, m.count) for m in r.mentions],
    )
    conn.executemany(
        "INSERT OR IGNORE INTO relation_sources VALUES (?,?,?,?,?,?,?)",
        [(user, collection, x.s, x.p, x.o, c, d.id) for x in r.relations for c in x.chunk_ids],
    )
    owned = r.owned
    conn.executemany(
        "INSERT INTO concepts VALUES (?,?,?,?) ON CONFLICT DO NOTHING",
        [(user, collection, e, int(e in owned)) for e in {m.entity for m in r.mentions}],
    )


def _as_list(v: object) -> list[object]:
    return list(v) if isinstance(v, list) else [v]


def _delete_docs(conn: sqlite3.Connection, user: str, collection: str, ids: list[str]) -> RemovedLinks:
    """Delete the documents' rows; returns the relations and concepts they linked (candidates)."""
    arg = (user, collection, json.dumps(ids))
    in_docs = " WHERE user = ? AND collection = ? AND document_id IN (SELECT value FROM json_each(?))"
    rels = conn.execute("SELECT DISTINCT s, p, o FROM relation_sources" + in_docs, arg).fetchall()
    ents = conn.execute("SELECT DISTINCT entity FROM mentions" + in_docs, arg).fetchall()
    for table in ("relation_sources", "mentions", "chunks", "doc_meta"):
        conn.execute("DELETE FROM " + table + in_docs, arg)
    conn.execute(
        "DELETE FROM documents WHERE user = ? AND collection = ? AND id IN (SELECT value FROM json_each(?))", arg
    )
    return RemovedLinks([(s, p, o) for s, p, o in rels], [e for (e,) in ents])


def _unlinked(conn: sqlite3.Connection, user: str, collection: str, removed: RemovedLinks) -> RemovedLinks:
    """Of the candidates, the relations without any source left and the owned concepts no chunk
    mentions (the concept rows of every unmentioned candidate go too)."""

    def one(sql: str, *args: str) -> tuple | None:  # type: ignore[type-arg]
        return conn.execute(sql, (user, collection, *args)).fetchone()

    rels = [r for r in removed.relations if one(RELATION_HAS_SOURCE, *r) is None]
    orphans = [e for e in removed.concepts if one(CONCEPT_MENTIONED, e) is None]
    owned = [e for e in orphans if one(CONCEPT_OWNED, e) == (1,)]
    conn.executemany(DELETE_CONCEPT, [(user, collection, e) for e in orphans])
    return RemovedLinks(rels, owned, removed.concepts)
