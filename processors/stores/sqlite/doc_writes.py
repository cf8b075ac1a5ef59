"""Row writes of the embedded document store (docs.db): a document's rows in, its rows out with
what they alone supported, and the one-time backfill of the store's own indexes."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Sequence

import numpy as np

from processors.algorithms.bm25 import terms
from processors.stores.documents_protocol import DocumentRecord, RemovedLinks, tenant_token
from processors.stores.sqlite import mention_rows, relation_rows
from processors.stores.sqlite.docs_schema import CHUNK_SPACE, vec_bytes, vec_of
from processors.stores.sqlite.mention_rows import OF_DOCS as SCOPED_ENTITIES
from processors.stores.sqlite.mention_rows import UNMENTIONED
from processors.stores.sqlite.spellings import add_spellings, take_spellings
from processors.stores.sqlite.vector_lists import VectorLists
from schemas.tenant import Tenant

INSERT_CHUNK = (
    "INSERT INTO chunks (user, collection, id, document_id, ordinal, text, start, end, tokens, vec, page, section)"
    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
)
OWNED = (
    "SELECT iri FROM concepts WHERE user = ? AND collection = ? AND owned = 1"
    " AND iri IN (SELECT value FROM json_each(?))"
)
DELETE_CONCEPT = "DELETE FROM concepts WHERE user = ? AND collection = ? AND iri = ?"
DELETE_CONCEPT_KEYS = "DELETE FROM concept_keys WHERE user = ? AND collection = ? AND iri = ?"


def count_terms(conn: sqlite3.Connection, tenant: Tenant, chunk_terms: list[list[str]], sign: int = 1) -> None:
    """Add (sign 1) or take away (-1) chunks, given their BM25 terms, from the kept statistics."""
    conn.execute(
        "INSERT INTO collection_counts VALUES (?, ?, ?, ?) ON CONFLICT DO UPDATE SET"
        " chunks = chunks + excluded.chunks, terms = terms + excluded.terms",
        (tenant.user, tenant.collection, sign * len(chunk_terms), sign * sum(len(t) for t in chunk_terms)),
    )
    df = Counter(t for words in chunk_terms for t in set(words))
    conn.executemany(
        "INSERT INTO term_df VALUES (?, ?, ?, ?) ON CONFLICT DO UPDATE SET df = df + excluded.df",
        [(tenant.user, tenant.collection, t, sign * n) for t, n in df.items()],
    )
    if sign < 0:
        conn.execute(
            "DELETE FROM term_df WHERE user = ? AND collection = ? AND df <= 0", (tenant.user, tenant.collection)
        )
        conn.execute(
            "DELETE FROM collection_counts WHERE user = ? AND collection = ? AND chunks <= 0",
            (tenant.user, tenant.collection),
        )


def insert_records(
    conn: sqlite3.Connection, vl: VectorLists, tenant: Tenant, records: Sequence[DocumentRecord]
) -> None:
    """Write a batch of documents' rows: the documents, their chunks (with their FTS terms, their
    vectors in the IVF lists and their subject), mentions, relation provenance, concepts. One
    statement a table for the whole batch, and the term statistics once: its cost does not grow
    statement by statement with the batch (issue 38)."""
    u, coll = tenant.user, tenant.collection
    conn.executemany("INSERT INTO documents VALUES (?,?,?,?,?,?,?,?,?)", [
        (u, coll, r.document.id, r.document.title, r.document.timestamp.timestamp() if r.document.timestamp else None,
         json.dumps(r.document.metadata), r.content_hash, len(r.chunks), r.title_entity) for r in records
    ])  # fmt: skip
    conn.executemany("INSERT OR IGNORE INTO doc_meta VALUES (?,?,?,?,?)", [
        (u, coll, r.document.id, k, json.dumps(v)) for r in records for k, vs in r.document.metadata.items()
        for v in _as_list(vs)
    ])  # fmt: skip
    vecs = [[np.asarray(v, dtype=np.float32) for v in r.vectors] for r in records]
    conn.executemany(INSERT_CHUNK, [
        (u, coll, c.id, r.document.id, c.ordinal, c.text, c.start, c.end, c.tokens, vec_bytes(v), c.page, c.section)
        for r, vs in zip(records, vecs, strict=True) for c, v in zip(r.chunks, vs, strict=True)
    ])  # fmt: skip
    # BM25 reads title and text
    words = {c.id: terms(f"{r.document.title}\n{c.text}" if r.document.title else c.text)
             for r in records for c in r.chunks}  # fmt: skip
    rowids = conn.execute(
        "SELECT rowid, id FROM chunks INDEXED BY chunks_doc WHERE user = ? AND collection = ?"
        " AND document_id IN (SELECT value FROM json_each(?))",
        (u, coll, json.dumps([r.document.id for r in records])),
    ).fetchall()
    token = tenant_token(tenant)
    conn.executemany(
        "INSERT INTO chunk_fts(rowid, tenant, terms) VALUES (?, ?, ?)",
        [(rowid, token, " ".join(words[cid])) for rowid, cid in rowids],
    )
    vl.add(conn, tenant, CHUNK_SPACE, [
        (c.id, r.document.id, v) for r, vs in zip(records, vecs, strict=True) for c, v in zip(r.chunks, vs, strict=True)
    ])  # fmt: skip
    conn.executemany("INSERT OR IGNORE INTO chunk_subjects VALUES (?,?,?,?,?)", [
        (u, coll, r.title_entity, c.id, r.document.id) for r in records if r.title_entity for c in r.chunks
    ])  # fmt: skip
    count_terms(conn, tenant, list(words.values()))
    by_id = {cid: rowid for rowid, cid in rowids}
    known = mention_rows.insert(conn, tenant, records, by_id)
    relation_rows.insert(conn, tenant, records, by_id, known)
    insert_concepts(conn, tenant, records)
    add_spellings(conn, tenant, records)


def insert_concepts(conn: sqlite3.Connection, tenant: Tenant, records: Sequence[DocumentRecord]) -> None:
    """The concepts the records mention, with their keys and aliases. The first document of the
    batch to mention a concept decides its row, as one by one; each row is sent once, in key order
    (a batch mentions a concept in many documents: sent per mention, the ignored duplicates were
    most of these two tables' write time, issue 38)."""
    first: dict[str, DocumentRecord] = {}
    for r in records:
        for m in r.mentions:
            first.setdefault(m.entity, r)
    u, coll = tenant.user, tenant.collection
    conn.executemany(
        "INSERT INTO concepts VALUES (?,?,?,?,?) ON CONFLICT DO NOTHING",
        [(u, coll, e, int(e in r.owned), r.keys.get(e, "")) for e, r in sorted(first.items())],
    )
    keys = {(k, e) for r in records for e in {m.entity for m in r.mentions}
            for k in (r.keys.get(e, ""), *r.aliases.get(e, ())) if k}  # fmt: skip
    conn.executemany("INSERT OR IGNORE INTO concept_keys VALUES (?,?,?,?)", [(u, coll, k, e) for k, e in sorted(keys)])


def _as_list(v: object) -> list[object]:
    return list(v) if isinstance(v, list) else [v]


def delete_docs(conn: sqlite3.Connection, vl: VectorLists, tenant: Tenant, ids: list[str]) -> RemovedLinks:
    """Delete the documents' rows (their chunks' FTS rows, vectors and subjects too); returns the
    relations and concepts they linked (candidates)."""
    arg = (tenant.user, tenant.collection, json.dumps(ids))
    in_docs = " WHERE user = ? AND collection = ? AND document_id IN (SELECT value FROM json_each(?))"
    rels = relation_rows.delete_of_docs(conn, tenant, arg[2])
    ents = conn.execute(SCOPED_ENTITIES, arg).fetchall()
    chunks = conn.execute("SELECT rowid, id FROM chunks INDEXED BY chunks_doc" + in_docs, arg).fetchall()
    rowids = json.dumps([rowid for rowid, _ in chunks])
    # json_each drives: a rowid lookup in the FTS table each (an IN on it can scan the table)
    fts_terms = "SELECT f.terms FROM json_each(?) j JOIN chunk_fts f ON f.rowid = j.value"
    words = [str(t).split() for (t,) in conn.execute(fts_terms, (rowids,))] if chunks else []
    conn.executemany("DELETE FROM chunk_fts WHERE rowid = ?", [(rowid,) for rowid, _ in chunks])
    vl.remove(conn, tenant, CHUNK_SPACE, [cid for _, cid in chunks])
    count_terms(conn, tenant, words, -1)
    take_spellings(conn, tenant, ids)
    mention_rows.delete_of_docs(conn, tenant, arg[2])  # before their chunks, through which they are found
    for table in ("chunks", "doc_meta", "chunk_subjects"):
        conn.execute("DELETE FROM " + table + in_docs, arg)
    conn.execute(
        "DELETE FROM documents WHERE user = ? AND collection = ? AND id IN (SELECT value FROM json_each(?))", arg
    )
    return RemovedLinks([(s, p, o) for s, p, o in rels], [e for (e,) in ents])


def unlinked(conn: sqlite3.Connection, tenant: Tenant, removed: RemovedLinks) -> RemovedLinks:
    """Of the candidates, the relations without any source left and the owned concepts no chunk
    mentions (the concept rows of every unmentioned candidate go too); a statement each, however
    many candidates."""

    def found(sql: str, items: list[object]) -> set[tuple[object, ...]]:
        return {tuple(r) for r in conn.execute(sql, (tenant.user, tenant.collection, json.dumps(items)))}

    gone = relation_rows.unsourced(conn, tenant, removed.relations) if removed.relations else set()
    orphans = [e for (e,) in found(UNMENTIONED, list(removed.concepts))] if removed.concepts else []
    owned = {e for (e,) in found(OWNED, list(orphans))} if orphans else set()
    conn.executemany(DELETE_CONCEPT, [(tenant.user, tenant.collection, e) for e in orphans])
    conn.executemany(DELETE_CONCEPT_KEYS, [(tenant.user, tenant.collection, e) for e in orphans])
    relation_rows.forget(conn, tenant, orphans)
    return RemovedLinks(
        [r for r in removed.relations if tuple(r) in gone],
        [e for e in removed.concepts if e in owned],
        removed.concepts,
    )


def backfill(conn: sqlite3.Connection, vl: VectorLists) -> int:
    """Index a docs.db written before the store searched its own indexes: FTS rows, IVF lists,
    subjects and counts for every chunk (once: a no-op when the FTS table has rows or no chunk
    exists). Returns the chunks indexed."""
    if (
        conn.execute("SELECT 1 FROM chunk_fts LIMIT 1").fetchone()
        or not conn.execute("SELECT 1 FROM chunks LIMIT 1").fetchone()
    ):
        return 0
    done = 0
    for user, collection in conn.execute("SELECT DISTINCT user, collection FROM documents").fetchall():
        tenant = Tenant(user, collection)
        token = tenant_token(tenant)
        rows = conn.execute(
            "SELECT c.rowid, c.id, c.document_id, c.text, c.vec, d.title, d.title_entity FROM chunks c JOIN documents d"
            " ON d.user = c.user AND d.collection = c.collection AND d.id = c.document_id"
            " WHERE c.user = ? AND c.collection = ?",
            (user, collection),
        ).fetchall()
        words = [terms(f"{r[5]}\n{r[3]}" if r[5] else r[3]) for r in rows]
        conn.executemany(
            "INSERT INTO chunk_fts(rowid, tenant, terms) VALUES (?, ?, ?)",
            [(r[0], token, " ".join(w)) for r, w in zip(rows, words, strict=True)],
        )
        vl.add(conn, tenant, CHUNK_SPACE, [(r[1], r[2], vec_of(r[4])) for r in rows])
        conn.executemany(
            "INSERT OR IGNORE INTO chunk_subjects VALUES (?,?,?,?,?)",
            [(user, collection, r[6], r[1], r[2]) for r in rows if r[6]],
        )
        count_terms(conn, tenant, words)
        conn.execute(
            "INSERT OR IGNORE INTO concept_keys SELECT user, collection, key, iri FROM concepts"
            " WHERE user = ? AND collection = ? AND key != ''",
            (user, collection),
        )
        done += len(rows)
    return done
