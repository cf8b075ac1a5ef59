"""The SQLite schema, queries and row helpers of the embedded document store (docs.db)."""

from __future__ import annotations

import json
import sqlite3

import numpy as np

from processors.algorithms.passage_rank import build_concepts
from processors.stores.documents_protocol import DocumentRecord, RemovedLinks, ScopeSql, scope_params
from processors.stores.local.chunk_index import ChunkIndex, RelationIndex
from schemas.documents import Chunk, Scope

SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    user TEXT NOT NULL, collection TEXT NOT NULL, id TEXT NOT NULL, title TEXT NOT NULL,
    timestamp REAL, metadata TEXT NOT NULL, content_hash TEXT NOT NULL, chunks INTEGER NOT NULL,
    title_entity TEXT,
    PRIMARY KEY (user, collection, id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS documents_time ON documents(user, collection, timestamp);
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
-- covering: what chunks mention is read from the index alone (a chunk's 15 rows, not 15 table lookups)
CREATE INDEX IF NOT EXISTS mentions_by_chunk ON mentions(user, collection, chunk_id, entity, document_id, count);
CREATE INDEX IF NOT EXISTS mentions_doc ON mentions(user, collection, document_id);
CREATE TABLE IF NOT EXISTS relation_sources (
    user TEXT NOT NULL, collection TEXT NOT NULL, s TEXT NOT NULL, p TEXT NOT NULL, o TEXT NOT NULL,
    chunk_id TEXT NOT NULL, document_id TEXT NOT NULL,
    PRIMARY KEY (user, collection, s, p, o, chunk_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS relation_sources_doc ON relation_sources(user, collection, document_id);
CREATE INDEX IF NOT EXISTS relation_sources_o ON relation_sources(user, collection, o, p, s);
CREATE TABLE IF NOT EXISTS relation_vectors (
    user TEXT NOT NULL, collection TEXT NOT NULL, s TEXT NOT NULL, p TEXT NOT NULL, o TEXT NOT NULL, vec BLOB NOT NULL,
    PRIMARY KEY (user, collection, s, p, o)
);
CREATE TABLE IF NOT EXISTS concepts (
    user TEXT NOT NULL, collection TEXT NOT NULL, iri TEXT NOT NULL, owned INTEGER NOT NULL, key TEXT NOT NULL,
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
SELECT m.entity, m.chunk_id, m.count FROM mentions m INDEXED BY mentions_by_chunk
WHERE m.user = ?1 AND m.collection = ?2 AND m.chunk_id IN (SELECT value FROM json_each(?3))
  AND (?4 IS NULL OR m.document_id IN (SELECT value FROM json_each(?4)))
"""
# The documents with a timestamp in [?3, ?4] ("episodes"); ?5: JSON array of allowed documents or null.
EPISODES = """
SELECT id FROM documents INDEXED BY documents_time WHERE user = ?1 AND collection = ?2 AND timestamp BETWEEN ?3 AND ?4
  AND (?5 IS NULL OR id IN (SELECT value FROM json_each(?5)))
"""
# Per entity (?3: JSON array), the distinct episodes (?4: JSON array) whose chunks mention it.
EPISODE_COUNTS = """
SELECT m.entity, count(DISTINCT m.document_id) FROM mentions m
WHERE m.user = ?1 AND m.collection = ?2 AND m.entity IN (SELECT value FROM json_each(?3))
  AND m.document_id IN (SELECT value FROM json_each(?4))
GROUP BY m.entity
"""
RELATION_HAS_SOURCE = (
    "SELECT 1 FROM relation_sources WHERE user = ? AND collection = ? AND s = ? AND p = ? AND o = ? LIMIT 1"
)
CONCEPT_MENTIONED = "SELECT 1 FROM mentions WHERE user = ? AND collection = ? AND entity = ? LIMIT 1"
CONCEPT_OWNED = "SELECT owned FROM concepts WHERE user = ? AND collection = ? AND iri = ?"
CLAIM_CONCEPT = (
    "INSERT INTO concepts VALUES (?1, ?2, ?3, 1, ?4) ON CONFLICT DO UPDATE SET owned = 1,"
    " key = CASE WHEN key = '' THEN excluded.key ELSE key END"
)
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
# Source chunks of relations (?3: JSON array of [s, p, o]), at most ?4 each, in scope (?5 or null).
# CROSS JOIN keeps the requested relations outside: each is then a primary-key lookup (SQLite's
# own choice scanned the whole collection, json_extract per row: 5.8 s for 60 relations of 91k).
RELATION_CHUNKS = """
SELECT s, p, o, chunk_id FROM (
  SELECT r.s, r.p, r.o, r.chunk_id, row_number() OVER (PARTITION BY r.s, r.p, r.o ORDER BY r.chunk_id) AS n
  FROM json_each(?3) k CROSS JOIN relation_sources r
  WHERE r.user = ?1 AND r.collection = ?2 AND r.s = json_extract(k.value, '$[0]')
    AND r.p = json_extract(k.value, '$[1]') AND r.o = json_extract(k.value, '$[2]')
    AND (?5 IS NULL OR r.document_id IN (SELECT value FROM json_each(?5))))
WHERE n <= ?4
"""
RELATION_ROWS = """
SELECT v.s, v.p, v.o, v.vec, json_group_array(DISTINCT r.document_id), count(DISTINCT r.chunk_id)
FROM relation_vectors v JOIN relation_sources r
  ON r.user = v.user AND r.collection = v.collection AND r.s = v.s AND r.p = v.p AND r.o = v.o
WHERE v.user = ? AND v.collection = ? GROUP BY v.s, v.p, v.o ORDER BY v.s, v.p, v.o
"""
INDEX_CHUNKS = """
SELECT c.id, c.document_id, c.text, c.vec, d.title, d.title_entity FROM chunks c JOIN documents d
  ON d.user = c.user AND d.collection = c.collection AND d.id = c.document_id
WHERE c.user = ? AND c.collection = ? ORDER BY c.id
"""
INDEX_MENTIONS = "SELECT chunk_id, entity FROM mentions WHERE user = ? AND collection = ?"
VERSION_CHECK_S = 1.0
# Relation vectors are many (tens per chunk): a rowid table keeps each row on its page (a
# WITHOUT ROWID row this long spills onto overflow pages: 2.5x the space).


def scoped_ids(conn: sqlite3.Connection, user: str, collection: str, scope: Scope | None) -> set[str] | None:
    """The documents of the scope (None: no narrower scope than the collection)."""
    if scope is None or scope.is_empty:
        return None
    sql: ScopeSql = scope_params(scope)
    return {r[0] for r in conn.execute(SCOPED_DOCS, (user, collection, sql.document_ids, sql.metadata))}


def chunk(r: tuple) -> Chunk:  # type: ignore[type-arg]
    cid, doc, ordinal, text, start, end, tokens, title = r
    return Chunk(id=cid, document_id=doc, ordinal=ordinal, text=text, start=start, end=end, tokens=tokens, title=title)


def collection_version(conn: sqlite3.Connection, user: str, collection: str) -> int:
    row = conn.execute(
        "SELECT version FROM docs_version WHERE user = ? AND collection = ?", (user, collection)
    ).fetchone()
    return int(row[0]) if row else 0


def bump(conn: sqlite3.Connection, user: str, collection: str) -> None:
    conn.execute(
        "INSERT INTO docs_version VALUES (?, ?, 1) ON CONFLICT(user, collection) DO UPDATE SET version = version + 1",
        (user, collection),
    )


def _matrix(blobs: list[bytes]) -> np.ndarray:  # type: ignore[type-arg]
    """Stored float32 vectors as one matrix (one row per blob)."""
    if not blobs:
        return np.zeros((0, 1), dtype=np.float32)
    return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), -1)


def build_relation_index(conn: sqlite3.Connection, user: str, collection: str, version: int) -> RelationIndex:
    """The collection's relation vectors with their documents and support."""
    rows = conn.execute(RELATION_ROWS, (user, collection)).fetchall()
    vecs = _matrix([r[3] for r in rows])
    return RelationIndex(
        version,
        [(r[0], r[1], r[2]) for r in rows],
        [frozenset(json.loads(r[4])) for r in rows],
        [int(r[5]) for r in rows],
        vecs,
    )


def build_index(conn: sqlite3.Connection, user: str, collection: str, version: int) -> ChunkIndex:
    """The collection's chunk search index (vectors, BM25 over title and text, concept graph)."""
    uc = (user, collection)
    rows = conn.execute(INDEX_CHUNKS, uc).fetchall()
    vecs = _matrix([r[3] for r in rows])
    ids = [r[0] for r in rows]
    at = {c: i for i, c in enumerate(ids)}
    mentions = [(at[c], e) for c, e in conn.execute(INDEX_MENTIONS, uc) if c in at]
    keys = dict(conn.execute("SELECT iri, key FROM concepts WHERE user = ? AND collection = ?", uc).fetchall())
    texts = [f"{r[4]}\n{r[2]}" if r[4] else r[2] for r in rows]
    concepts = build_concepts([r[2] for r in rows], [r[5] for r in rows], mentions, keys)
    return ChunkIndex.build(version, ids, [r[1] for r in rows], texts, vecs, concepts, mentions)


def insert_record(conn: sqlite3.Connection, user: str, collection: str, r: DocumentRecord) -> None:
    d = r.document
    ts = d.timestamp.timestamp() if d.timestamp else None
    conn.execute(
        "INSERT INTO documents VALUES (?,?,?,?,?,?,?,?,?)",
        (user, collection, d.id, d.title, ts, json.dumps(d.metadata), r.content_hash, len(r.chunks), r.title_entity),
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
    conn.executemany(
        "INSERT OR IGNORE INTO relation_vectors VALUES (?,?,?,?,?,?)",
        [(user, collection, x.s, x.p, x.o, np.asarray(x.vector, dtype=np.float32).tobytes())
         for x in r.relations if x.vector is not None],
    )  # fmt: skip
    owned = r.owned
    conn.executemany(
        "INSERT INTO concepts VALUES (?,?,?,?,?) ON CONFLICT DO NOTHING",
        [(user, collection, e, int(e in owned), r.keys.get(e, "")) for e in {m.entity for m in r.mentions}],
    )


def _as_list(v: object) -> list[object]:
    return list(v) if isinstance(v, list) else [v]


def delete_docs(conn: sqlite3.Connection, user: str, collection: str, ids: list[str]) -> RemovedLinks:
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


def unlinked(conn: sqlite3.Connection, user: str, collection: str, removed: RemovedLinks) -> RemovedLinks:
    """Of the candidates, the relations without any source left and the owned concepts no chunk
    mentions (the concept rows of every unmentioned candidate go too)."""

    def one(sql: str, *args: str) -> tuple | None:  # type: ignore[type-arg]
        return conn.execute(sql, (user, collection, *args)).fetchone()

    rels = [r for r in removed.relations if one(RELATION_HAS_SOURCE, *r) is None]
    conn.executemany(
        "DELETE FROM relation_vectors WHERE user = ? AND collection = ? AND s = ? AND p = ? AND o = ?",
        [(user, collection, *r) for r in rels],
    )
    orphans = [e for e in removed.concepts if one(CONCEPT_MENTIONED, e) is None]
    owned = [e for e in orphans if one(CONCEPT_OWNED, e) == (1,)]
    conn.executemany(DELETE_CONCEPT, [(user, collection, e) for e in orphans])
    return RemovedLinks(rels, owned, removed.concepts)


def migrate(conn: sqlite3.Connection) -> None:
    """Bring a docs.db written by an earlier version up to date (columns added since, indexes replaced)."""
    for table, column, ddl in (
        ("documents", "title_entity", "ALTER TABLE documents ADD COLUMN title_entity TEXT"),
        ("concepts", "key", "ALTER TABLE concepts ADD COLUMN key TEXT NOT NULL DEFAULT ''"),
    ):
        cols = [r[1] for r in conn.execute("PRAGMA table_info(" + table + ")")]
        if cols and column not in cols:
            conn.execute(ddl)
    conn.execute("DROP INDEX IF EXISTS mentions_chunk")  # replaced by the covering mentions_by_chunk
