"""The SQLite schema, read queries and row helpers of the embedded document store (docs.db); its
row writes are in doc_writes.py."""

from __future__ import annotations

import json
import sqlite3

import numpy as np

from processors.stores.documents_protocol import ScopeSql, scope_params
from processors.stores.sqlite import mention_rows
from processors.stores.sqlite.mention_rows import CHUNK_OF_KEY, ROWID_OF
from processors.stores.sqlite.mention_rows import ID as MENTION_ID
from processors.stores.sqlite.mention_rows import SCHEMA as MENTIONS_SCHEMA
from processors.stores.sqlite.relation_rows import SCHEMA as RELATIONS_SCHEMA
from processors.stores.sqlite.relation_rows import migrate as migrate_relations
from processors.stores.sqlite.spellings import SCHEMA as SPELLINGS_SCHEMA
from processors.stores.sqlite.spellings import migrate as migrate_spellings
from processors.stores.sqlite.vector_lists import SCHEMA as VECTOR_LISTS_SCHEMA
from processors.stores.sqlite.vector_lists import migrate as migrate_vector_lists
from schemas.documents import Chunk
from schemas.tenant import Tenant

CHUNK_SPACE = "chunk"  # the IVF space of chunk vectors
# Relations kept a vector each until relation search was answered from the entity vectors
# (issue 38: 40% of docs.db): a docs.db written before drops them on open.
OLD_RELATION_SPACE = "relation"

SCHEMA = (
    """
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
    tokens INTEGER NOT NULL, vec BLOB NOT NULL, page INTEGER, section TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (user, collection, id)
);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(user, collection, document_id);
CREATE TABLE IF NOT EXISTS concepts (
    user TEXT NOT NULL, collection TEXT NOT NULL, iri TEXT NOT NULL, owned INTEGER NOT NULL, key TEXT NOT NULL,
    PRIMARY KEY (user, collection, iri)
) WITHOUT ROWID;
-- Every key a concept is found by: its own and its aliases ("neil peart" of "neil ellwood peart").
CREATE TABLE IF NOT EXISTS concept_keys (
    user TEXT NOT NULL, collection TEXT NOT NULL, key TEXT NOT NULL, iri TEXT NOT NULL,
    PRIMARY KEY (user, collection, key, iri)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS concept_keys_iri ON concept_keys(user, collection, iri);
-- The chunks whose subject an entity is (their document's title names it): graphrank's strong links.
CREATE TABLE IF NOT EXISTS chunk_subjects (
    user TEXT NOT NULL, collection TEXT NOT NULL, entity TEXT NOT NULL, chunk_id TEXT NOT NULL,
    document_id TEXT NOT NULL,
    PRIMARY KEY (user, collection, entity, chunk_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS chunk_subjects_doc ON chunk_subjects(user, collection, document_id);
-- Chunks per collection and their BM25 terms, kept by every write (graphrank's N, BM25's mean
-- length: no count(*) over a collection), and the chunks holding each term (BM25's df): a
-- collection ranks by its own statistics, whoever else shares the FTS table.
CREATE TABLE IF NOT EXISTS collection_counts (
    user TEXT NOT NULL, collection TEXT NOT NULL, chunks INTEGER NOT NULL, terms INTEGER NOT NULL,
    PRIMARY KEY (user, collection)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS term_df (
    user TEXT NOT NULL, collection TEXT NOT NULL, term TEXT NOT NULL, df INTEGER NOT NULL,
    PRIMARY KEY (user, collection, term)
) WITHOUT ROWID;
-- Deletion marks (id '': the whole collection) with the stamp each delete issued, so a write of a
-- load begun before the delete (a later batch, a killed load's request redelivered) is refused.
CREATE TABLE IF NOT EXISTS doc_deletions (
    user TEXT NOT NULL, collection TEXT NOT NULL, id TEXT NOT NULL, at REAL NOT NULL,
    PRIMARY KEY (user, collection, id)
) WITHOUT ROWID;
-- BM25 over each chunk's terms (title and text, stemmed: bm25.terms); rowid = the chunk's rowid.
-- `tenant` is a hash of user + collection, matched inside every query. The terms are made already:
-- 'ascii' only splits them at spaces (as Neo4j's whitespace analyzer), where unicode61's Unicode 6.1
-- tables would drop letters of later Unicode versions. (A docs.db made before keeps unicode61.)
CREATE VIRTUAL TABLE IF NOT EXISTS chunk_fts USING fts5(tenant, terms, tokenize = 'ascii');
DROP TABLE IF EXISTS docs_version;
DROP TABLE IF EXISTS relation_vectors;
"""
    + RELATIONS_SCHEMA
    + MENTIONS_SCHEMA
    + VECTOR_LISTS_SCHEMA
    + SPELLINGS_SCHEMA
)

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
_CHUNK_COLS = "c.id, c.document_id, c.ordinal, c.text, c.start, c.end, c.tokens, d.title, c.page, c.section"
GET_CHUNKS = (
    "SELECT " + _CHUNK_COLS + " FROM chunks c JOIN documents d ON d.user = c.user AND d.collection = c.collection"
    " AND d.id = c.document_id WHERE c.user = ? AND c.collection = ? AND c.id IN (SELECT value FROM json_each(?))"
)
# Links of a neighbourhood: per entity of ?3 (JSON array), of its first ?5 mentions in scope (?4:
# the scope flag), the ?6 most mentioning as a JSON array of [chunk, count] (the correlated
# subquery keeps each entity's own LIMIT in one statement; ties by chunk key). Only those ?6 chunk
# rows are read, for their ids: at 1M chunks a hub's 256 rows were ~300 ms of a question (issue 38).
ENTITY_LINKS = (
    "SELECT k.value, (SELECT json_group_array(json_array(c.id, x.count)) FROM (SELECT chunk, count FROM"
    " (SELECT m.chunk, m.count FROM chunk_mentions m WHERE m.entity = " + MENTION_ID.format("k.value")
    + " AND (?4 IS NULL OR EXISTS (SELECT 1 FROM chunks s WHERE s.rowid = " + CHUNK_OF_KEY
    + " AND s.document_id IN (SELECT id FROM temp.scope_docs))) LIMIT ?5) ORDER BY count DESC, chunk LIMIT ?6) x"
    " CROSS JOIN chunks c WHERE c.rowid = " + ROWID_OF.format("x.chunk") + " AND c.user = ?1 AND c.collection = ?2)"
    " FROM json_each(?3) k"
)  # fmt: skip
LINKS_READ = 256  # mentions of one entity read before the most-mentioning are kept (a hub has thousands)
# The documents with a timestamp in [?3, ?4] ("episodes"); ?5: JSON array of allowed documents or null.
EPISODES = """
SELECT id FROM documents INDEXED BY documents_time WHERE user = ?1 AND collection = ?2 AND timestamp BETWEEN ?3 AND ?4
  AND (?5 IS NULL OR id IN (SELECT value FROM json_each(?5)))
"""
# Per entity (?3: JSON array), the distinct episodes (?4: JSON array) whose chunks mention it.
EPISODE_COUNTS = f"""
SELECT e.iri, count(DISTINCT c.document_id) FROM iri_ids e CROSS JOIN chunk_mentions m CROSS JOIN chunks c
WHERE e.user = ?1 AND e.collection = ?2 AND e.iri IN (SELECT value FROM json_each(?3)) AND m.entity = e.id
  AND c.rowid = {CHUNK_OF_KEY} AND c.document_id IN (SELECT value FROM json_each(?4))
GROUP BY e.iri
"""
# A claim makes the concept owned (a concept loaded from triples is never claimed: it is named).
OWNED_CONCEPTS = (
    "SELECT iri FROM concepts WHERE user = ? AND collection = ? AND owned = 1"
    " AND iri IN (SELECT value FROM json_each(?))"
)
CLAIM_CONCEPT = (
    "INSERT INTO concepts VALUES (?1, ?2, ?3, 1, ?4) ON CONFLICT DO UPDATE SET owned = 1,"
    " key = CASE WHEN key = '' THEN excluded.key ELSE key END"
)
# Deletion marks: `at` is the stamp the delete issued (the collection's highest plus one; a docs.db
# of an earlier kgflow holds delete times there, also only ever growing). id '': the collection.
WRITE_STAMP = "SELECT coalesce(max(at), 0) FROM doc_deletions WHERE user = ? AND collection = ?"
NOTE_DELETED = (
    "INSERT INTO doc_deletions (user, collection, id, at) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (user, collection, id) DO UPDATE SET at = max(at, excluded.at)"
)
DELETED_AFTER = (
    "SELECT id FROM doc_deletions WHERE user = ? AND collection = ? AND at > ? "
    "AND id IN (SELECT value FROM json_each(?) UNION SELECT '')"
)
DROP_DELETION_MARKS = "DELETE FROM doc_deletions WHERE user = ? AND collection = ?"
CONCEPT_KEYS = (
    "SELECT key, iri FROM concept_keys WHERE user = ? AND collection = ? AND key IN (SELECT value FROM json_each(?))"
)


# A chunk's vector is kept in float16 (half the bytes of float32; a cosine moves in its fourth
# digit), marked by one trailing byte: a float32 vector (of an older docs.db) has a length
# divisible by 4, a marked float16 one an odd length, whatever the dimension.
_HALF = b"\x10"


def vec_bytes(vector: np.ndarray) -> bytes:
    """A chunk vector as stored."""
    return np.asarray(vector, dtype=np.float16).tobytes() + _HALF


def vec_of(blob: bytes) -> np.ndarray:
    """A stored chunk vector (float16 or an older float32 one) as float32."""
    if len(blob) % 2:
        return np.frombuffer(blob, dtype=np.float16, count=len(blob) // 2).astype(np.float32)
    return np.frombuffer(blob, dtype=np.float32)


def scoped_ids(conn: sqlite3.Connection, tenant: Tenant) -> set[str] | None:
    """The documents of the tenant's scope (None: no narrower scope than the collection)."""
    scope = tenant.scope
    if scope is None or scope.is_empty:
        return None
    sql: ScopeSql = scope_params(scope)
    return {r[0] for r in conn.execute(SCOPED_DOCS, (tenant.user, tenant.collection, sql.document_ids, sql.metadata))}


def chunk(r: tuple) -> Chunk:  # type: ignore[type-arg]
    cid, doc, ordinal, text, start, end, tokens, title, page, section = r
    return Chunk(id=cid, document_id=doc, ordinal=ordinal, text=text, start=start, end=end, tokens=tokens, title=title,
                 page=page, section=section or "")  # fmt: skip


def scope_size(conn: sqlite3.Connection, tenant: Tenant, allowed: set[str] | None) -> int:
    """Chunks of the collection, or of the scope's documents (kept counts: no scan of chunks)."""
    if allowed is None:
        row = conn.execute(
            "SELECT chunks FROM collection_counts WHERE user = ? AND collection = ?", (tenant.user, tenant.collection)
        ).fetchone()
        return int(row[0]) if row else 0
    sql = (
        "SELECT coalesce(sum(chunks), 0) FROM documents WHERE user = ? AND collection = ?"
        " AND id IN (SELECT value FROM json_each(?))"
    )
    return int(conn.execute(sql, (tenant.user, tenant.collection, json.dumps(sorted(allowed)))).fetchone()[0])


def migrate(conn: sqlite3.Connection) -> None:
    """Bring a docs.db written by an earlier version up to date (columns added since, indexes replaced)."""
    for table, column, ddl in (
        ("documents", "title_entity", "ALTER TABLE documents ADD COLUMN title_entity TEXT"),
        ("concepts", "key", "ALTER TABLE concepts ADD COLUMN key TEXT NOT NULL DEFAULT ''"),
        ("chunks", "page", "ALTER TABLE chunks ADD COLUMN page INTEGER"),
        ("chunks", "section", "ALTER TABLE chunks ADD COLUMN section TEXT NOT NULL DEFAULT ''"),
    ):
        cols = [r[1] for r in conn.execute("PRAGMA table_info(" + table + ")")]
        if cols and column not in cols:
            conn.execute(ddl)
    conn.execute("DROP INDEX IF EXISTS mentions_chunk")  # replaced by the covering mentions_by_chunk
    conn.execute("DROP INDEX IF EXISTS mentions_doc")  # a document's mentions are found through its chunks
    migrate_relations(conn)
    mention_rows.migrate(conn)  # after the relations: their migration makes iri_ids
    migrate_spellings(conn)
    migrate_vector_lists(conn)
    # The relation vectors' IVF space goes (relation search needs none now); vector_spaces has a
    # row per tenant and space, so each delete is scoped to a tenant's keys.
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'vector_spaces'").fetchone():
        return  # a new file: nothing to drop
    old = conn.execute("SELECT user, collection FROM vector_spaces WHERE space = ?", (OLD_RELATION_SPACE,)).fetchall()
    for table in ("vector_items", "vector_lists", "vector_spaces"):
        sql = "DELETE FROM " + table + " WHERE user = ? AND collection = ? AND space = ?"
        conn.executemany(sql, [(u, c, OLD_RELATION_SPACE) for u, c in old])
