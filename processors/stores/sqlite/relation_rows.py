"""Relation provenance in docs.db: which chunks state each relation, in integers.

A relation's provenance was a row per (relation, chunk) holding user, collection, three IRIs, the
chunk id and the document id, in a table and two indexes: 21 KB per chunk, the largest table of
docs.db (issue 38). Now each IRI a relation names (its ends, its predicate) gets a small integer
once per tenant (`iri_ids`), and a source row is four integers (s, p, o, the chunk's rowid in
`chunks`). Every read starts from the tenant's own `iri_ids` (user and collection inside the
query) or from its chunks, so a row of another tenant is never reached; the IRIs and chunk ids
come back by rowid lookups. `chunk_fts` keys chunks by the same rowid.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from processors.stores.documents_protocol import DocumentRecord
from processors.stores.sqlite.pool import has_table
from schemas.tenant import Tenant

TABLES = (
    """CREATE TABLE IF NOT EXISTS iri_ids (
    id INTEGER PRIMARY KEY, user TEXT NOT NULL, collection TEXT NOT NULL, iri TEXT NOT NULL,
    UNIQUE (user, collection, iri))""",
    """CREATE TABLE IF NOT EXISTS rel_sources (
    s INTEGER NOT NULL, p INTEGER NOT NULL, o INTEGER NOT NULL, chunk INTEGER NOT NULL,
    PRIMARY KEY (s, p, o, chunk)) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS rel_sources_o ON rel_sources(o, p, s)",  # in-edges
    "CREATE INDEX IF NOT EXISTS rel_sources_chunk ON rel_sources(chunk)",  # a document's rows, to delete
)
SCHEMA = ";\n".join(TABLES) + ";\n"

# The id of one IRI of the tenant (?1, ?2): null where none.
_ID = "(SELECT id FROM iri_ids WHERE user = ?1 AND collection = ?2 AND iri = {})"
# The rowids of the chunks of the scope's documents (?4: JSON array), or every chunk when null.
_IN_SCOPE = (
    "(?4 IS NULL OR r.chunk IN (SELECT rowid FROM chunks INDEXED BY chunks_doc WHERE user = ?1 AND collection = ?2"
    " AND document_id IN (SELECT value FROM json_each(?4))))"
)
# IRIs of the grouped ids x.s, x.p, x.o.
_NAMES = " JOIN iri_ids si ON si.id = x.s JOIN iri_ids pi ON pi.id = x.p JOIN iri_ids oi ON oi.id = x.o"

# Relations among the entities (?3: JSON array), support = source chunks in scope, at most ?5
# (ties by subject, object, predicate). Read pair by pair: each entity's predicates as object
# (`preds`: a skip over rel_sources_o, one seek per predicate), then for each subject of ?3 one
# range of the primary key (s, p, o) counted. Grouping every in-edge of the entities read all of
# a hub's sources (at 1M chunks over a million rows for 50 entities, 250-400 ms; issue 38).
AMONG = (
    "WITH RECURSIVE e(id) AS MATERIALIZED (SELECT id FROM iri_ids WHERE user = ?1 AND collection = ?2"
    " AND iri IN (SELECT value FROM json_each(?3))),"
    " preds(o, p) AS (SELECT id, (SELECT min(p) FROM rel_sources INDEXED BY rel_sources_o WHERE o = e.id) FROM e"
    " UNION ALL SELECT o, (SELECT min(r.p) FROM rel_sources r INDEXED BY rel_sources_o WHERE r.o = preds.o"
    " AND r.p > preds.p) FROM preds WHERE p IS NOT NULL)"
    " SELECT si.iri, pi.iri, oi.iri, x.w FROM (SELECT s.id AS s, pr.p AS p, pr.o AS o, (SELECT count(*)"
    " FROM rel_sources r WHERE r.s = s.id AND r.p = pr.p AND r.o = pr.o AND " + _IN_SCOPE + ") AS w"
    " FROM preds pr CROSS JOIN e s WHERE pr.p IS NOT NULL) x" + _NAMES +
    " WHERE x.w > 0 ORDER BY x.w DESC, si.iri, oi.iri, pi.iri LIMIT ?5"
)  # fmt: skip
# One entity's (?3) relations as subject / object with their support in scope, most supported
# first (ties in key order), at most ?5.
OUT = (
    "SELECT si.iri, pi.iri, oi.iri, x.w FROM (SELECT r.s, r.p, r.o, count(*) AS w FROM rel_sources r"
    " WHERE r.s = " + _ID.format("?3") + " AND " + _IN_SCOPE + " GROUP BY r.p, r.o) x" + _NAMES +
    " ORDER BY x.w DESC, pi.iri, oi.iri LIMIT ?5"
)  # fmt: skip
IN = (
    "SELECT si.iri, pi.iri, oi.iri, x.w FROM (SELECT r.s, r.p, r.o, count(*) AS w FROM rel_sources r"
    " INDEXED BY rel_sources_o WHERE r.o = " + _ID.format("?3") + " AND " + _IN_SCOPE + " GROUP BY r.p, r.s) x"
    + _NAMES + " ORDER BY x.w DESC, pi.iri, si.iri LIMIT ?5"
)  # fmt: skip
# One entity's relation edges with a source in scope (?4 given), in key order (predicate, far end).
SCOPED_OUT = (
    "SELECT si.iri, pi.iri, oi.iri FROM (SELECT DISTINCT r.s, r.p, r.o FROM rel_sources r"
    " WHERE r.s = " + _ID.format("?3") + " AND " + _IN_SCOPE + ") x" + _NAMES + " ORDER BY pi.iri, oi.iri LIMIT ?5"
)
SCOPED_IN = (
    "SELECT si.iri, pi.iri, oi.iri FROM (SELECT DISTINCT r.s, r.p, r.o FROM rel_sources r INDEXED BY rel_sources_o"
    " WHERE r.o = " + _ID.format("?3") + " AND " + _IN_SCOPE + ") x" + _NAMES + " ORDER BY pi.iri, si.iri LIMIT ?5"
)
# Source chunks of relations (?3: JSON array of [s, p, o]), the first ?4 of each by chunk id, in
# scope (?5 or null); `{}` is what is read of each chunk. The requested relations drive (CROSS
# JOIN): each is three id lookups and a primary-key range.
_SOURCES = """
SELECT s, p, o, x FROM (
  SELECT k.value ->> 0 AS s, k.value ->> 1 AS p, k.value ->> 2 AS o, {} AS x,
    row_number() OVER (PARTITION BY k.value ->> 0, k.value ->> 1, k.value ->> 2 ORDER BY c.id) AS n
  FROM json_each(?3) k CROSS JOIN iri_ids si CROSS JOIN iri_ids pi CROSS JOIN iri_ids oi
    CROSS JOIN rel_sources r CROSS JOIN chunks c
  WHERE si.user = ?1 AND si.collection = ?2 AND si.iri = k.value ->> 0
    AND pi.user = ?1 AND pi.collection = ?2 AND pi.iri = k.value ->> 1
    AND oi.user = ?1 AND oi.collection = ?2 AND oi.iri = k.value ->> 2
    AND r.s = si.id AND r.p = pi.id AND r.o = oi.id AND c.rowid = r.chunk AND c.user = ?1 AND c.collection = ?2
    AND (?5 IS NULL OR c.document_id IN (SELECT value FROM json_each(?5))))
WHERE n <= ?4
"""
SOURCE_CHUNKS = _SOURCES.format("c.id")
SOURCE_VECTORS = _SOURCES.format("c.vec")
# Every relation of the collection with its support (what community detection reads), streamed in
# subject order (the subjects' IRI index, then each one's key range): no sort of the collection.
EDGES = (
    "SELECT t.iri, oi.iri, count(*) FROM iri_ids t CROSS JOIN rel_sources r JOIN iri_ids oi ON oi.id = r.o"
    " WHERE t.user = ?1 AND t.collection = ?2 AND r.s = t.id GROUP BY t.iri, r.p, r.o"
)
# The relations among the entities (?3: JSON array) with their support: the subgraph a community
# update re-clusters.
EDGES_AMONG = (
    "SELECT t.iri, oi.iri, count(*) FROM json_each(?3) j JOIN iri_ids t ON t.user = ?1 AND t.collection = ?2"
    " AND t.iri = j.value CROSS JOIN rel_sources r JOIN iri_ids oi ON oi.id = r.o"
    " WHERE r.s = t.id AND oi.iri IN (SELECT value FROM json_each(?3)) GROUP BY t.iri, r.p, r.o"
)
# Of the relations (?3: JSON array of [s, p, o]), those without a source left.
UNSOURCED = (
    "SELECT j.value ->> 0, j.value ->> 1, j.value ->> 2 FROM json_each(?3) j WHERE NOT EXISTS (SELECT 1 FROM"
    " rel_sources WHERE s = " + _ID.format("j.value ->> 0") + " AND p = " + _ID.format("j.value ->> 1") +
    " AND o = " + _ID.format("j.value ->> 2") + ")"
)  # fmt: skip
# The documents' (?3: JSON array) chunks' rowids, and the relations they are sources of.
_DOC_CHUNKS = (
    "SELECT rowid FROM chunks INDEXED BY chunks_doc WHERE user = ?1 AND collection = ?2"
    " AND document_id IN (SELECT value FROM json_each(?3))"
)
OF_DOCS = (
    "SELECT si.iri, pi.iri, oi.iri FROM (SELECT DISTINCT s, p, o FROM rel_sources WHERE chunk IN ("
    + _DOC_CHUNKS
    + ")) x"
    + _NAMES
)
DELETE_OF_DOCS = "DELETE FROM rel_sources WHERE chunk IN (" + _DOC_CHUNKS + ")"
# Ids of the IRIs (?3: JSON array) no source or mention row names any more (concepts gone from the collection).
DELETE_UNUSED_IDS = (
    "DELETE FROM iri_ids WHERE user = ?1 AND collection = ?2 AND iri IN (SELECT value FROM json_each(?3))"
    " AND NOT EXISTS (SELECT 1 FROM rel_sources WHERE s = iri_ids.id)"
    " AND NOT EXISTS (SELECT 1 FROM rel_sources INDEXED BY rel_sources_o WHERE o = iri_ids.id)"
    " AND NOT EXISTS (SELECT 1 FROM chunk_mentions WHERE entity = iri_ids.id)"  # mention_rows.py's
)
DELETE_COLLECTION = (
    "DELETE FROM rel_sources WHERE s IN (SELECT id FROM iri_ids WHERE user = ?1 AND collection = ?2)",
    "DELETE FROM iri_ids WHERE user = ?1 AND collection = ?2",
)
_ADD_IDS = "INSERT OR IGNORE INTO iri_ids (user, collection, iri) SELECT ?1, ?2, value FROM json_each(?3)"
_IDS = "SELECT iri, id FROM iri_ids WHERE user = ?1 AND collection = ?2 AND iri IN (SELECT value FROM json_each(?3))"
_ADD_SOURCE = "INSERT OR IGNORE INTO rel_sources VALUES (?, ?, ?, ?)"


def iri_ids(conn: sqlite3.Connection, tenant: Tenant, iris: Sequence[str]) -> dict[str, int]:
    """The tenant's integer id of each of `iris`, made for those without one."""
    arg = (tenant.user, tenant.collection, json.dumps(sorted(set(iris))))
    conn.execute(_ADD_IDS, arg)
    return {str(iri): int(i) for iri, i in conn.execute(_IDS, arg)}


def insert(
    conn: sqlite3.Connection,
    tenant: Tenant,
    records: Sequence[DocumentRecord],
    chunk_rowids: dict[str, int],
    ids: dict[str, int] | None = None,
) -> None:
    """The records' relation sources (`chunk_rowids`: their chunks' rowids, written already; `ids`:
    IRIs whose ids are known already, updated with the rest): the ids are mapped here and the rows
    go in in key order (a JSON row per source mapped inside SQL was half of a batch's write time,
    issue 38)."""
    relations = [x for r in records for x in r.relations]
    if not relations:
        return
    ids = {} if ids is None else ids
    missing = {i for x in relations for i in (x.s, x.p, x.o) if i not in ids}
    if missing:
        ids.update(iri_ids(conn, tenant, list(missing)))
    rows = set()
    for x in relations:
        s, p, o = ids[x.s], ids[x.p], ids[x.o]
        rows.update((s, p, o, chunk_rowids[c]) for c in x.chunk_ids if c in chunk_rowids)
    conn.executemany(_ADD_SOURCE, sorted(rows))


def delete_of_docs(conn: sqlite3.Connection, tenant: Tenant, ids: str) -> list[tuple[str, str, str]]:
    """Delete the sources the documents' chunks (`ids`: JSON array of document ids) gave; returns
    the relations they supported (candidates to unlink). Run before the chunks are deleted."""
    args = (tenant.user, tenant.collection, ids)
    rels = [(s, p, o) for s, p, o in conn.execute(OF_DOCS, args)]
    if rels:
        conn.execute(DELETE_OF_DOCS, args)
    return rels


def unsourced(
    conn: sqlite3.Connection, tenant: Tenant, relations: Sequence[tuple[str, str, str]]
) -> set[tuple[str, str, str]]:
    """Of `relations`, those no chunk is a source of any more."""
    args = (tenant.user, tenant.collection, json.dumps([list(r) for r in relations]))
    return {(s, p, o) for s, p, o in conn.execute(UNSOURCED, args)}


def forget(conn: sqlite3.Connection, tenant: Tenant, iris: Sequence[str]) -> None:
    """Drop the ids of `iris` (concepts gone) that no source row names."""
    if iris:
        conn.execute(DELETE_UNUSED_IDS, (tenant.user, tenant.collection, json.dumps(list(iris))))


def delete_collection(conn: sqlite3.Connection, tenant: Tenant) -> None:
    """Every relation source and id of the collection."""
    for sql in DELETE_COLLECTION:
        conn.execute(sql, (tenant.user, tenant.collection))


def migrate(conn: sqlite3.Connection) -> None:
    """A docs.db written before keeps its provenance in `relation_sources` (text rows): moved into
    the integer tables once, then dropped (the file keeps its size until VACUUM)."""
    if not has_table(conn, "relation_sources"):
        return
    for ddl in TABLES:
        conn.execute(ddl)
    for col in ("s", "p", "o"):
        conn.execute(
            "INSERT OR IGNORE INTO iri_ids (user, collection, iri) SELECT DISTINCT user, collection, "
            + col + " FROM relation_sources"
        )  # fmt: skip
    conn.execute(
        "INSERT OR IGNORE INTO rel_sources SELECT si.id, pi.id, oi.id, c.rowid FROM relation_sources r"
        " JOIN iri_ids si ON si.user = r.user AND si.collection = r.collection AND si.iri = r.s"
        " JOIN iri_ids pi ON pi.user = r.user AND pi.collection = r.collection AND pi.iri = r.p"
        " JOIN iri_ids oi ON oi.user = r.user AND oi.collection = r.collection AND oi.iri = r.o"
        " JOIN chunks c ON c.user = r.user AND c.collection = r.collection AND c.id = r.chunk_id"
    )
    conn.execute("DROP TABLE relation_sources")
