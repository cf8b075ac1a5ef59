"""Chunk-entity mentions in docs.db, in integers.

A mention was a row of user, collection, entity IRI, chunk id, document id and count, in a table
and a covering index: 3.4 KB per chunk at 10k chunks (issue 38). Now a mention is three integers
(the entity's id in `iri_ids`, which relation_rows.py keeps per tenant, the chunk's rowid in
`chunks`, the count), keyed by entity and indexed by chunk. Every read starts from the tenant's
own `iri_ids` or `chunks` rows (user and collection inside the query), so another tenant's row is
never reached; the IRIs, chunk ids and documents come back by rowid lookups. The view `mentions`
shows the rows as text, for a reader of the file (nothing in the store reads it).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from processors.stores.documents_protocol import DocumentRecord
from processors.stores.sqlite.pool import has_table
from processors.stores.sqlite.relation_rows import TABLES as RELATION_TABLES
from processors.stores.sqlite.relation_rows import iri_ids
from schemas.tenant import Tenant

# A mention is keyed by its chunk's rowid scrambled (times _MIX modulo the prime _P, a bijection
# undone by _UNMIX): an entity's mentions are read in key order up to a limit (LINKS_READ of a
# hub's thousands), which in rowid order would always be its earliest-written chunks; in chunk-id
# order (the text key's, a hash) they were a fair sample, and scrambled they still are.
_P, _MIX, _UNMIX = 2147483647, 1327217885, 1998591742
KEY_OF_CHUNK = f"(c.rowid * {_MIX} % {_P})"  # the key of chunk `c`
ROWID_OF = f"({{}} * {_UNMIX} % {_P})"  # the chunk rowid of a key (format with the key's column)
CHUNK_OF_KEY = ROWID_OF.format("m.chunk")  # the rowid of mention `m`'s chunk
_TABLE = """CREATE TABLE IF NOT EXISTS chunk_mentions (
    entity INTEGER NOT NULL, chunk INTEGER NOT NULL, count INTEGER NOT NULL,
    PRIMARY KEY (entity, chunk)) WITHOUT ROWID"""
TABLES = (
    _TABLE,
    # covering: what chunks mention is read from the index alone
    "CREATE INDEX IF NOT EXISTS chunk_mentions_by_chunk ON chunk_mentions(chunk, entity, count)",
    """CREATE VIEW IF NOT EXISTS mentions AS SELECT e.user AS user, e.collection AS collection, e.iri AS entity,
    c.id AS chunk_id, c.document_id AS document_id, m.count AS count
    FROM chunk_mentions m JOIN iri_ids e ON e.id = m.entity JOIN chunks c ON c.rowid = """
    + CHUNK_OF_KEY,
)
SCHEMA = ";\n".join(TABLES) + ";\n"

# The tenant's (?1, ?2) id of an IRI: null where none.
ID = "(SELECT id FROM iri_ids WHERE user = ?1 AND collection = ?2 AND iri = {})"
# A mention's chunk `c` in the tenant and in the scope (temp.scope_docs, when ?4 is not null).
IN_SCOPE = (
    "c.rowid = " + CHUNK_OF_KEY + " AND c.user = ?1 AND c.collection = ?2"
    " AND (?4 IS NULL OR c.document_id IN (SELECT id FROM temp.scope_docs))"
)
# Of candidates (?3: JSON array), the concepts no chunk mentions.
UNMENTIONED = (
    "SELECT j.value FROM json_each(?3) j WHERE NOT EXISTS (SELECT 1 FROM chunk_mentions WHERE entity = "
    + ID.format("j.value")
    + ")"
)
# What the chunks (?3: JSON array of ids) mention: (entity, chunk id, count); ?4: JSON array of
# allowed documents or null.
OF_CHUNKS = (
    "SELECT e.iri, c.id, m.count FROM chunks c CROSS JOIN chunk_mentions m INDEXED BY chunk_mentions_by_chunk"
    " CROSS JOIN iri_ids e WHERE c.user = ?1 AND c.collection = ?2 AND c.id IN (SELECT value FROM json_each(?3))"
    " AND (?4 IS NULL OR c.document_id IN (SELECT value FROM json_each(?4)))"
    " AND m.chunk = " + KEY_OF_CHUNK + " AND e.id = m.entity"
)
# The entities the chunks of documents (?3: JSON array) mention, through the chunks.
OF_DOCS = (
    "SELECT DISTINCT e.iri FROM chunks c INDEXED BY chunks_doc CROSS JOIN chunk_mentions m INDEXED BY"
    " chunk_mentions_by_chunk CROSS JOIN iri_ids e WHERE c.user = ?1 AND c.collection = ?2"
    " AND c.document_id IN (SELECT value FROM json_each(?3)) AND m.chunk = " + KEY_OF_CHUNK + " AND e.id = m.entity"
)
DELETE_OF_DOCS = (
    "DELETE FROM chunk_mentions WHERE chunk IN (SELECT " + KEY_OF_CHUNK + " FROM chunks c INDEXED BY chunks_doc"
    " WHERE user = ?1 AND collection = ?2 AND document_id IN (SELECT value FROM json_each(?3)))"
)
DELETE_COLLECTION = (
    "DELETE FROM chunk_mentions WHERE entity IN (SELECT id FROM iri_ids WHERE user = ?1 AND collection = ?2)"
)
# Every mention of the collection (what community detection reads) / of the entities of ?3.
OF_COLLECTION = (
    "SELECT e.iri, c.id, m.count FROM iri_ids e CROSS JOIN chunk_mentions m CROSS JOIN chunks c"
    " WHERE e.user = ?1 AND e.collection = ?2 AND m.entity = e.id AND c.rowid = " + CHUNK_OF_KEY
)
OF_ENTITIES = (
    "SELECT e.iri, c.id, m.count FROM json_each(?3) j CROSS JOIN iri_ids e CROSS JOIN chunk_mentions m"
    " CROSS JOIN chunks c WHERE e.user = ?1 AND e.collection = ?2 AND e.iri = j.value AND m.entity = e.id"
    " AND c.rowid = " + CHUNK_OF_KEY
)
_ADD = "INSERT INTO chunk_mentions VALUES (?, ?, ?) ON CONFLICT DO UPDATE SET count = count + excluded.count"


def insert(
    conn: sqlite3.Connection, tenant: Tenant, records: Sequence[DocumentRecord], chunk_rowids: dict[str, int]
) -> dict[str, int]:
    """The records' mentions (`chunk_rowids`: their chunks' rowids, written already), in key order;
    returns the ids of the entities they name (relation_rows.insert maps the same IRIs)."""
    found = [(m.entity, m.chunk_id, m.count) for r in records for m in r.mentions if m.chunk_id in chunk_rowids]
    if not found:
        return {}
    ids = iri_ids(conn, tenant, [e for e, _, _ in found])
    conn.executemany(_ADD, sorted((ids[e], chunk_rowids[c] * _MIX % _P, n) for e, c, n in found))
    return ids


def delete_of_docs(conn: sqlite3.Connection, tenant: Tenant, ids: str) -> None:
    """Delete the mentions of the documents' chunks (`ids`: JSON array), before the chunks go."""
    conn.execute(DELETE_OF_DOCS, (tenant.user, tenant.collection, ids))


def migrate(conn: sqlite3.Connection) -> None:
    """A docs.db written before keeps its mentions as text rows (`mentions` a table): moved into
    the integer table once, then dropped (the file keeps its size until VACUUM)."""
    if not has_table(conn, "mentions"):
        return
    for ddl in RELATION_TABLES:
        conn.execute(ddl)
    conn.execute(_TABLE)
    conn.execute(
        "INSERT OR IGNORE INTO iri_ids (user, collection, iri) SELECT DISTINCT user, collection, entity FROM mentions"
    )
    conn.execute(
        "INSERT OR IGNORE INTO chunk_mentions SELECT e.id, " + KEY_OF_CHUNK + ", m.count FROM mentions m"
        " JOIN iri_ids e ON e.user = m.user AND e.collection = m.collection AND e.iri = m.entity"
        " JOIN chunks c ON c.user = m.user AND c.collection = m.collection AND c.id = m.chunk_id"
    )
    conn.execute("DROP TABLE mentions")
