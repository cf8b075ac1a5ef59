"""Concept spellings in the embedded document store (docs.db): each document's spellings of the
concepts it owns, with their mentions (`doc_spellings`), and their sums per concept (`spellings`),
which a write adds to and a delete or replace takes away from in its own transaction, so a
concept's label (its most frequent spelling) is a function of the documents stored, read in
one statement whatever the collection's size."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Sequence

from processors.stores.documents_protocol import DocumentRecord
from schemas.tenant import Tenant

SCHEMA = """
CREATE TABLE IF NOT EXISTS spellings (
    id INTEGER PRIMARY KEY, user TEXT NOT NULL, collection TEXT NOT NULL, iri TEXT NOT NULL, label TEXT NOT NULL,
    n INTEGER NOT NULL, UNIQUE (user, collection, iri, label)
);
-- A document's share of each spelling (`spelling`: the id of its tenant's row in `spellings`): a
-- document's rows were user, collection, document, IRI and label in text (1.5 KB a chunk, issue 38).
CREATE TABLE IF NOT EXISTS doc_spellings (
    document_id TEXT NOT NULL, spelling INTEGER NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (document_id, spelling)
) WITHOUT ROWID;
"""
_ADD = (
    "INSERT INTO spellings (user, collection, iri, label, n) VALUES (?, ?, ?, ?, ?)"
    " ON CONFLICT (user, collection, iri, label) DO UPDATE SET n = n + excluded.n"
)
# A batch's spellings go through a temporary table of the connection: summed into `spellings` in
# (iri, label) order (new rows get their ids in that order) and joined to their ids in SQL. Looked
# up row by row from a JSON array of [iri, label] they took ~0.5 s of a 2,000-document batch (issue 38).
_BATCH = "CREATE TEMP TABLE IF NOT EXISTS batch_spellings (d TEXT, iri TEXT, label TEXT, n INTEGER)"
_SUM_BATCH = (
    "INSERT INTO spellings (user, collection, iri, label, n) SELECT ?1, ?2, iri, label, sum(n)"
    " FROM temp.batch_spellings GROUP BY iri, label ORDER BY iri, label"
    " ON CONFLICT (user, collection, iri, label) DO UPDATE SET n = n + excluded.n"
)
_DOCS_OF_BATCH = (
    "INSERT INTO doc_spellings SELECT b.d, s.id, b.n FROM temp.batch_spellings b CROSS JOIN spellings s"
    " WHERE s.user = ?1 AND s.collection = ?2 AND s.iri = b.iri AND s.label = b.label"
)
# The documents' (?3: JSON array) spellings, through the tenant's own rows.
_OF_DOCS = (
    "SELECT d.document_id, s.id, s.iri, s.label, d.n FROM json_each(?3) j CROSS JOIN doc_spellings d"
    " CROSS JOIN spellings s WHERE d.document_id = j.value AND s.id = d.spelling AND s.user = ?1 AND s.collection = ?2"
)
_DROP_DOC = "DELETE FROM doc_spellings WHERE document_id = ? AND spelling = ?"
_SPENT = "DELETE FROM spellings WHERE user = ? AND collection = ? AND iri = ? AND label = ? AND n <= 0"
_READ = (
    "SELECT iri, label, n FROM spellings WHERE user = ? AND collection = ? AND iri IN (SELECT value FROM json_each(?))"
)
DELETE_COLLECTION = (
    "DELETE FROM doc_spellings WHERE spelling IN (SELECT id FROM spellings WHERE user = ?1 AND collection = ?2)",
    "DELETE FROM spellings WHERE user = ?1 AND collection = ?2",
)


def add_spellings(conn: sqlite3.Connection, tenant: Tenant, records: Sequence[DocumentRecord]) -> None:
    """Record the documents' spellings and add them to their concepts' sums."""
    rows = [(r.document.id, iri, label, n)
            for r in records for iri, counts in r.spellings.items() for label, n in counts.items()]  # fmt: skip
    if not rows:
        return
    conn.execute(_BATCH)
    conn.execute("DELETE FROM temp.batch_spellings")
    conn.executemany("INSERT INTO temp.batch_spellings VALUES (?, ?, ?, ?)", rows)
    conn.execute(_SUM_BATCH, (tenant.user, tenant.collection))
    conn.execute(_DOCS_OF_BATCH, (tenant.user, tenant.collection))
    conn.execute("DELETE FROM temp.batch_spellings")


def take_spellings(conn: sqlite3.Connection, tenant: Tenant, ids: Sequence[str]) -> None:
    """Take the documents' spellings away from their concepts' sums (a spelling left with none goes)."""
    found = conn.execute(_OF_DOCS, (tenant.user, tenant.collection, json.dumps(list(ids)))).fetchall()
    conn.executemany(_DROP_DOC, [(d, i) for d, i, _, _, _ in found])
    gone = Counter[tuple[str, str]]()
    for _, _, iri, label, n in found:
        gone[iri, label] += n
    _adjust(conn, tenant, gone, -1)


def _adjust(conn: sqlite3.Connection, tenant: Tenant, counts: Counter[tuple[str, str]], sign: int) -> None:
    """Add (sign 1) or take away (-1) spellings' mentions from the sums."""
    rows = [(tenant.user, tenant.collection, iri, label, sign * n) for (iri, label), n in sorted(counts.items())]
    conn.executemany(_ADD, rows)
    if sign < 0:
        conn.executemany(_SPENT, [row[:4] for row in rows])


def delete_collection(conn: sqlite3.Connection, tenant: Tenant) -> None:
    """Every spelling of the collection."""
    for sql in DELETE_COLLECTION:
        conn.execute(sql, (tenant.user, tenant.collection))


def migrate(conn: sqlite3.Connection) -> None:
    """A docs.db written before keeps a document's spellings in text rows and the sums without ids:
    both moved into the tables above once (the file keeps its size until VACUUM)."""
    cols = [r[1] for r in conn.execute("PRAGMA table_info(doc_spellings)")]
    if "user" not in cols:
        return  # new, or moved already
    conn.execute("ALTER TABLE doc_spellings RENAME TO old_doc_spellings")
    conn.execute("ALTER TABLE spellings RENAME TO old_spellings")
    conn.executescript(SCHEMA)
    conn.execute("INSERT INTO spellings (user, collection, iri, label, n) SELECT user, collection, iri, label, n"
                 " FROM old_spellings")  # fmt: skip
    conn.execute(
        "INSERT INTO doc_spellings SELECT o.document_id, s.id, o.n FROM old_doc_spellings o JOIN spellings s"
        " ON s.user = o.user AND s.collection = o.collection AND s.iri = o.iri AND s.label = o.label"
    )
    conn.execute("DROP TABLE old_doc_spellings")
    conn.execute("DROP TABLE old_spellings")


def read_spellings(conn: sqlite3.Connection, tenant: Tenant, iris: Sequence[str]) -> dict[str, dict[str, int]]:
    """Each of `iris`' spellings with their mentions (concepts with none left out)."""
    out: dict[str, dict[str, int]] = {}
    for iri, label, n in conn.execute(_READ, (tenant.user, tenant.collection, json.dumps(list(iris)))):
        out.setdefault(iri, {})[label] = int(n)
    return out
