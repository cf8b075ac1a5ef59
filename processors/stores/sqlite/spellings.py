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
CREATE TABLE IF NOT EXISTS doc_spellings (
    user TEXT NOT NULL, collection TEXT NOT NULL, document_id TEXT NOT NULL, iri TEXT NOT NULL,
    label TEXT NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (user, collection, document_id, iri, label)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS spellings (
    user TEXT NOT NULL, collection TEXT NOT NULL, iri TEXT NOT NULL, label TEXT NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (user, collection, iri, label)
) WITHOUT ROWID;
"""
TABLES = ("doc_spellings", "spellings")
_ADD = (
    "INSERT INTO spellings VALUES (?, ?, ?, ?, ?) ON CONFLICT (user, collection, iri, label) "
    "DO UPDATE SET n = n + excluded.n"
)
_IN_DOCS = " WHERE user = ? AND collection = ? AND document_id IN (SELECT value FROM json_each(?))"
_OF_DOCS = "SELECT iri, label, n FROM doc_spellings" + _IN_DOCS
_SPENT = "DELETE FROM spellings WHERE user = ? AND collection = ? AND iri = ? AND label = ? AND n <= 0"
_READ = (
    "SELECT iri, label, n FROM spellings WHERE user = ? AND collection = ? AND iri IN (SELECT value FROM json_each(?))"
)


def add_spellings(conn: sqlite3.Connection, tenant: Tenant, records: Sequence[DocumentRecord]) -> None:
    """Record the documents' spellings and add them to their concepts' sums."""
    u, coll = tenant.user, tenant.collection
    rows = [(u, coll, r.document.id, iri, label, n)
            for r in records for iri, counts in r.spellings.items() for label, n in counts.items()]  # fmt: skip
    conn.executemany("INSERT INTO doc_spellings VALUES (?, ?, ?, ?, ?, ?)", rows)
    added = Counter[tuple[str, str]]()
    for _, _, _, iri, label, n in rows:
        added[iri, label] += n
    _adjust(conn, tenant, added, 1)


def take_spellings(conn: sqlite3.Connection, tenant: Tenant, ids: Sequence[str]) -> None:
    """Take the documents' spellings away from their concepts' sums (a spelling left with none goes)."""
    arg = (tenant.user, tenant.collection, json.dumps(list(ids)))
    gone = Counter[tuple[str, str]]()
    for iri, label, n in conn.execute(_OF_DOCS, arg):
        gone[iri, label] += n
    _adjust(conn, tenant, gone, -1)
    conn.execute("DELETE FROM doc_spellings" + _IN_DOCS, arg)


def _adjust(conn: sqlite3.Connection, tenant: Tenant, counts: Counter[tuple[str, str]], sign: int) -> None:
    """Add (sign 1) or take away (-1) spellings' mentions from the sums."""
    rows = [(tenant.user, tenant.collection, iri, label, sign * n) for (iri, label), n in sorted(counts.items())]
    conn.executemany(_ADD, rows)
    if sign < 0:
        conn.executemany(_SPENT, [row[:4] for row in rows])


def read_spellings(conn: sqlite3.Connection, tenant: Tenant, iris: Sequence[str]) -> dict[str, dict[str, int]]:
    """Each of `iris`' spellings with their mentions (concepts with none left out)."""
    out: dict[str, dict[str, int]] = {}
    for iri, label, n in conn.execute(_READ, (tenant.user, tenant.collection, json.dumps(list(iris)))):
        out.setdefault(iri, {})[label] = int(n)
    return out
