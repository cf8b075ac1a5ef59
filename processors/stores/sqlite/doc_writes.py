"""Row writes of the embedded document store (docs.db): a document's rows in, its rows out with
what they alone supported, and the one-time backfill of the store's own indexes."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter

import numpy as np

from processors.algorithms.bm25 import terms
from processors.stores.documents_protocol import DocumentRecord, RemovedLinks, tenant_token
from processors.stores.sqlite.docs_schema import CHUNK_SPACE
from processors.stores.sqlite.vector_lists import VectorLists
from schemas.tenant import Tenant

INSERT_CHUNK = (
    "INSERT INTO chunks (user, collection, id, document_id, ordinal, text, start, end, tokens, vec, page, section)"
    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
)
RELATION_HAS_SOURCE = (
    "SELECT 1 FROM relation_sources WHERE user = ? AND collection = ? AND s = ? AND p = ? AND o = ? LIMIT 1"
)
CONCEPT_MENTIONED = "SELECT 1 FROM mentions WHERE user = ? AND collection = ? AND entity = ? LIMIT 1"
CONCEPT_OWNED = "SELECT owned FROM concepts WHERE user = ? AND collection = ? AND iri = ?"
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


def insert_record(conn: sqlite3.Connection, vl: VectorLists, tenant: Tenant, r: DocumentRecord) -> None:
    """Write one document's rows: the document, its chunks (with their FTS terms, their vectors
    in the IVF lists and their subject), mentions, relation provenance, concepts."""
    d = r.document
    ts = d.timestamp.timestamp() if d.timestamp else None
    conn.execute(
        "INSERT INTO documents VALUES (?,?,?,?,?,?,?,?,?)",
        (
            tenant.user,
            tenant.collection,
            d.id,
            d.title,
            ts,
            json.dumps(d.metadata),
            r.content_hash,
            len(r.chunks),
            r.title_entity,
        ),
    )
    meta = [
        (tenant.user, tenant.collection, d.id, k, json.dumps(v)) for k, vs in d.metadata.items() for v in _as_list(vs)
    ]
    conn.executemany("INSERT OR IGNORE INTO doc_meta VALUES (?,?,?,?,?)", meta)
    token = tenant_token(tenant)
    vecs = [np.asarray(v, dtype=np.float32) for v in r.vectors]
    chunk_terms = []
    for c, v in zip(r.chunks, vecs, strict=True):
        row = (
            tenant.user,
            tenant.collection,
            c.id,
            d.id,
            c.ordinal,
            c.text,
            c.start,
            c.end,
            c.tokens,
            v.tobytes(),
            c.page,
            c.section,
        )
        rowid = conn.execute(INSERT_CHUNK, row).lastrowid
        chunk_terms.append(terms(f"{d.title}\n{c.text}" if d.title else c.text))  # BM25 reads title and text
        conn.execute(
            "INSERT INTO chunk_fts(rowid, tenant, terms) VALUES (?, ?, ?)", (rowid, token, " ".join(chunk_terms[-1]))
        )
    vl.add(conn, tenant, CHUNK_SPACE, [(c.id, d.id, v) for c, v in zip(r.chunks, vecs, strict=True)])
    if r.title_entity:
        conn.executemany(
            "INSERT OR IGNORE INTO chunk_subjects VALUES (?,?,?,?,?)",
            [(tenant.user, tenant.collection, r.title_entity, c.id, d.id) for c in r.chunks],
        )
    count_terms(conn, tenant, chunk_terms)
    conn.executemany(
        "INSERT INTO mentions VALUES (?,?,?,?,?,?) ON CONFLICT DO UPDATE SET count = count + excluded.count",
        [(tenant.user, tenant.collection, m.entity, m.chunk_id, d.id, m.count) for m in r.mentions],
    )
    conn.executemany(
        "INSERT OR IGNORE INTO relation_sources VALUES (?,?,?,?,?,?,?)",
        [(tenant.user, tenant.collection, x.s, x.p, x.o, c, d.id) for x in r.relations for c in x.chunk_ids],
    )
    owned = r.owned
    mentioned = {m.entity for m in r.mentions}
    conn.executemany(
        "INSERT INTO concepts VALUES (?,?,?,?,?) ON CONFLICT DO NOTHING",
        [(tenant.user, tenant.collection, e, int(e in owned), r.keys.get(e, "")) for e in mentioned],
    )
    conn.executemany(
        "INSERT OR IGNORE INTO concept_keys VALUES (?,?,?,?)",
        [
            (tenant.user, tenant.collection, k, e)
            for e in mentioned
            for k in (r.keys.get(e, ""), *r.aliases.get(e, ()))
            if k
        ],
    )


def _as_list(v: object) -> list[object]:
    return list(v) if isinstance(v, list) else [v]


def delete_docs(conn: sqlite3.Connection, vl: VectorLists, tenant: Tenant, ids: list[str]) -> RemovedLinks:
    """Delete the documents' rows (their chunks' FTS rows, vectors and subjects too); returns the
    relations and concepts they linked (candidates)."""
    arg = (tenant.user, tenant.collection, json.dumps(ids))
    in_docs = " WHERE user = ? AND collection = ? AND document_id IN (SELECT value FROM json_each(?))"
    rels = conn.execute("SELECT DISTINCT s, p, o FROM relation_sources" + in_docs, arg).fetchall()
    ents = conn.execute("SELECT DISTINCT entity FROM mentions" + in_docs, arg).fetchall()
    chunks = conn.execute("SELECT rowid, id FROM chunks INDEXED BY chunks_doc" + in_docs, arg).fetchall()
    words = [
        str(conn.execute("SELECT terms FROM chunk_fts WHERE rowid = ?", (rowid,)).fetchone()[0]).split()
        for rowid, _ in chunks
    ]
    conn.executemany("DELETE FROM chunk_fts WHERE rowid = ?", [(rowid,) for rowid, _ in chunks])
    vl.remove(conn, tenant, CHUNK_SPACE, [cid for _, cid in chunks])
    count_terms(conn, tenant, words, -1)
    for table in ("relation_sources", "mentions", "chunks", "doc_meta", "chunk_subjects"):
        conn.execute("DELETE FROM " + table + in_docs, arg)
    conn.execute(
        "DELETE FROM documents WHERE user = ? AND collection = ? AND id IN (SELECT value FROM json_each(?))", arg
    )
    return RemovedLinks([(s, p, o) for s, p, o in rels], [e for (e,) in ents])


def unlinked(conn: sqlite3.Connection, tenant: Tenant, removed: RemovedLinks) -> RemovedLinks:
    """Of the candidates, the relations without any source left and the owned concepts no chunk
    mentions (the concept rows of every unmentioned candidate go too)."""

    def one(sql: str, *args: str) -> tuple | None:  # type: ignore[type-arg]
        return conn.execute(sql, (tenant.user, tenant.collection, *args)).fetchone()

    rels = [r for r in removed.relations if one(RELATION_HAS_SOURCE, *r) is None]
    orphans = [e for e in removed.concepts if one(CONCEPT_MENTIONED, e) is None]
    owned = [e for e in orphans if one(CONCEPT_OWNED, e) == (1,)]
    conn.executemany(DELETE_CONCEPT, [(tenant.user, tenant.collection, e) for e in orphans])
    conn.executemany(DELETE_CONCEPT_KEYS, [(tenant.user, tenant.collection, e) for e in orphans])
    return RemovedLinks(rels, owned, removed.concepts)


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
        vl.add(conn, tenant, CHUNK_SPACE, [(r[1], r[2], np.frombuffer(r[4], np.float32)) for r in rows])
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
