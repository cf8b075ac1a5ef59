"""graph.db's dictionary-encoded layout: each term (IRI or literal) spelt once in `terms`, each
(user, collection) once in `scopes`, a triple four integers in its keyed table and two indexes.

A triple spelt out in full three times (table key, pos, ops) took ~470 bytes; as integers it is
a few dozen (issue 38). Reads name terms and scopes by value inside the same statement (scalar
subqueries on the unique value indexes), so every read stays one statement scoped by tenant, and
ordered reads sort by the joined values: the ids are assigned in arrival order, not value order.

Terms no triple or label uses any more (after a remove or a collection delete) are kept: every
read reaches a term only through a triple or label row of its scope, so an unused term answers
nothing, and a reload of the same text reuses it. Finding unused terms would scan every
collection's three indexes (they all start with the scope).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from processors.stores.sqlite.pool import has_table
from schemas.tenant import Tenant
from schemas.terms import Term

LOAD_STATE = """
CREATE TABLE IF NOT EXISTS load_state (
    user TEXT NOT NULL, collection TEXT NOT NULL, started REAL NOT NULL, finished REAL,
    source TEXT NOT NULL DEFAULT '', triples INTEGER NOT NULL DEFAULT 0, vectors INTEGER NOT NULL DEFAULT 0,
    error TEXT, PRIMARY KEY (user, collection)
) WITHOUT ROWID"""
# The triples table is its spo index (WITHOUT ROWID); pos and ops hold the key's columns again in
# their order. A subject or predicate is an IRI term; an object any term.
TABLES = (
    LOAD_STATE,
    "CREATE TABLE IF NOT EXISTS scopes (id INTEGER PRIMARY KEY, user TEXT NOT NULL, collection TEXT NOT NULL,"
    " UNIQUE (user, collection))",
    "CREATE TABLE IF NOT EXISTS terms (id INTEGER PRIMARY KEY, value TEXT NOT NULL, lit INTEGER NOT NULL,"
    " dt TEXT NOT NULL, lang TEXT NOT NULL, UNIQUE (value, lit, dt, lang))",
    "CREATE TABLE IF NOT EXISTS triples (scope INTEGER NOT NULL, s INTEGER NOT NULL, p INTEGER NOT NULL,"
    " o INTEGER NOT NULL, PRIMARY KEY (scope, s, p, o)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS pos ON triples(scope, p, o)",
    "CREATE INDEX IF NOT EXISTS ops ON triples(scope, o, p, s)",
    # an IRI's label: the literal term of its (last written) label triple
    "CREATE TABLE IF NOT EXISTS labels (scope INTEGER NOT NULL, iri INTEGER NOT NULL, label INTEGER NOT NULL,"
    " PRIMARY KEY (scope, iri)) WITHOUT ROWID",
)
SCHEMA = ";\n".join(TABLES) + ";\n"

# Scalar subqueries naming a scope, an IRI term, any term by value (parameters: user, collection;
# the IRI; value, lit, dt, lang). A missing one is NULL, which matches no row.
SCOPE = "(SELECT id FROM scopes WHERE user = ? AND collection = ?)"
IRI = "(SELECT id FROM terms WHERE value = ? AND lit = 0 AND dt = '' AND lang = '')"
TERM = "(SELECT id FROM terms WHERE value = ? AND lit = ? AND dt = ? AND lang = ?)"

TermKey = tuple[str, int, str, str]  # value, is a literal, datatype or "", language or ""


def iri_key(t: Term) -> TermKey:
    """A subject's or predicate's term: its value as an IRI (as the text layout stored it)."""
    return (t.value, 0, "", "")


def term_key(t: Term) -> TermKey:
    """An object's term: value, literal flag, datatype, language."""
    return (t.value, 0 if t.is_iri else 1, t.datatype or "", t.language or "")


def scope_id(conn: sqlite3.Connection, tenant: Tenant) -> int:
    """The (user, collection)'s scope number, made on its first write."""
    made = (  # a no-op update on conflict, so the statement returns the stored row's id too
        "INSERT INTO scopes(user, collection) VALUES (?, ?)"
        " ON CONFLICT (user, collection) DO UPDATE SET user = excluded.user RETURNING id"
    )
    return int(conn.execute(made, (tenant.user, tenant.collection)).fetchone()[0])


def term_ids(conn: sqlite3.Connection, keys: Iterable[TermKey]) -> dict[TermKey, int]:
    """The id of each term, made for the ones not stored yet (inside the writing transaction): a
    few statements for the batch, through a temporary table of the connection (bound parameters:
    a JSON array would cut a value at a NUL character)."""
    wanted = list(dict.fromkeys(keys))
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS batch_terms (v TEXT, l INTEGER, d TEXT, g TEXT)")
    conn.execute("DELETE FROM temp.batch_terms")
    conn.executemany("INSERT INTO temp.batch_terms VALUES (?, ?, ?, ?)", wanted)
    conn.execute("INSERT OR IGNORE INTO terms(value, lit, dt, lang) SELECT v, l, d, g FROM temp.batch_terms")
    find = (
        "SELECT t.id FROM temp.batch_terms b CROSS JOIN terms t"
        " ON t.value = b.v AND t.lit = b.l AND t.dt = b.d AND t.lang = b.g ORDER BY b.rowid"
    )
    return dict(zip(wanted, (int(i) for (i,) in conn.execute(find)), strict=True))


def migrate_text_layout(conn: sqlite3.Connection) -> None:
    """A graph.db written before holds triples and labels spelt out (user, collection and term text
    in every row; its triples maybe still in `triples_rowid`, an older copy a kill interrupted).
    They are copied into the encoded tables and the text tables dropped in one transaction: a kill
    leaves the text layout, which the next open copies again."""
    if not _text_tables(conn):
        return
    conn.execute("BEGIN IMMEDIATE")  # another process opening the file may have copied it meanwhile
    sources = _text_tables(conn)
    if not sources:
        return
    if not has_table(conn, "load_state"):  # collections loaded before loads were recorded
        conn.execute(LOAD_STATE)
        for t in sources:
            if t != "labels":
                conn.execute(_LOADS_OF[t])
    for old in ("triples", "labels"):
        if old in sources:
            conn.execute(f"ALTER TABLE {old} RENAME TO {old}_text")
    for index in ("spo", "pos", "ops", "osp"):  # the text tables' indexes, named as the new ones
        conn.execute(f"DROP INDEX IF EXISTS {index}")
    for statement in TABLES:
        conn.execute(statement)
    for t in sources:
        _copy(conn, t)


def _text_tables(conn: sqlite3.Connection) -> list[str]:
    """The tables of the text layout the file still holds (labels after the triples)."""
    found = [t for t in ("triples_rowid", "triples") if "user" in _columns(conn, t)]
    return found + (["labels"] if "user" in _columns(conn, "labels") else [])


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute("SELECT * FROM pragma_table_info(?)", (table,))}


# Each statement copies from a text table named in place of {t} (a constant of this module).
_COPY_TRIPLES = (
    "INSERT OR IGNORE INTO scopes(user, collection) SELECT DISTINCT user, collection FROM {t}",
    "INSERT OR IGNORE INTO terms(value, lit, dt, lang) SELECT s, 0, '', '' FROM {t}"
    " UNION SELECT p, 0, '', '' FROM {t} UNION SELECT o, o_lit, o_dt, o_lang FROM {t}",
    "INSERT OR IGNORE INTO triples(scope, s, p, o) SELECT c.id, s.id, p.id, o.id FROM {t} x"
    " JOIN scopes c ON c.user = x.user AND c.collection = x.collection"
    " JOIN terms s ON s.value = x.s AND s.lit = 0 AND s.dt = '' AND s.lang = ''"
    " JOIN terms p ON p.value = x.p AND p.lit = 0 AND p.dt = '' AND p.lang = ''"
    " JOIN terms o ON o.value = x.o AND o.lit = x.o_lit AND o.dt = x.o_dt AND o.lang = x.o_lang",
)
# A label row names a literal term of its text (its label triple's, when there is one).
_COPY_LABELS = (
    "INSERT OR IGNORE INTO scopes(user, collection) SELECT DISTINCT user, collection FROM {t}",
    "INSERT OR IGNORE INTO terms(value, lit, dt, lang) SELECT iri, 0, '', '' FROM {t}",
    "INSERT OR IGNORE INTO terms(value, lit, dt, lang) SELECT label, 1, '', '' FROM {t} x"
    " WHERE NOT EXISTS (SELECT 1 FROM terms WHERE value = x.label AND lit = 1)",
    "INSERT OR REPLACE INTO labels(scope, iri, label) SELECT c.id, i.id,"
    " (SELECT min(id) FROM terms WHERE value = x.label AND lit = 1) FROM {t} x"
    " JOIN scopes c ON c.user = x.user AND c.collection = x.collection"
    " JOIN terms i ON i.value = x.iri AND i.lit = 0 AND i.dt = '' AND i.lang = ''",
)


# Per text table (as the file names it before the renames): its copy, then its drop.
_COPIES = {
    source: [s.format(t=table) for s in statements] + ["DROP TABLE " + table]
    for source, table, statements in (
        ("triples_rowid", "triples_rowid", _COPY_TRIPLES),
        ("triples", "triples_text", _COPY_TRIPLES),
        ("labels", "labels_text", _COPY_LABELS),
    )
}
_LOADS_OF = {  # collections loaded before loads were recorded: complete loads of unknown source
    t: "INSERT OR IGNORE INTO load_state(user, collection, started, finished, source)"
    " SELECT DISTINCT user, collection, 0, 0, 'an earlier kgflow' FROM " + t
    for t in ("triples_rowid", "triples")
}


def _copy(conn: sqlite3.Connection, source: str) -> None:
    """Copy one text table (`_text_tables`' name for it) into the encoded tables, then drop it."""
    for statement in _COPIES[source]:
        conn.execute(statement)
