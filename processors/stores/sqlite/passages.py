"""What graphrank and chunk search read from the embedded document store for one question
(algorithms/passage_rank.PassageSource): candidates from the store's own indexes — the IVF lists
over chunk vectors (vector_lists.py) and FTS5 over the chunks' BM25 terms — the concepts a
question names, and one hop's links. Each function runs inside one read call (one connection,
one thread); the scope is a predicate inside every query (`temp.scope_docs`, filled per call)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Sequence

import numpy as np

from processors.algorithms.bm25 import best_bm25, query_terms
from processors.algorithms.passage_rank import Candidates, ConceptLinks, HopLinks, Passage, name_runs
from processors.algorithms.vectors import top_k
from processors.stores.documents_protocol import tenant_token
from processors.stores.sqlite.docs_schema import CHUNK_SPACE, CONCEPT_KEYS, bm25_stats
from processors.stores.sqlite.vector_lists import VectorLists
from schemas.tenant import Tenant

EXACT_SCOPE = 50_000  # a scope of at most this many chunks is searched exactly (all its vectors read)
RESCORE = 4  # IVF hits read per wanted hit, rescored with the stored float vectors
SUBJECT_READ = 512  # subject chunks of one concept read, the best SUBJECT_KEEP kept by cosine
SUBJECT_KEEP = 64

LEXICAL = (
    "SELECT c.id, chunk_fts.terms, -bm25(chunk_fts, 0.0, 1.0) AS s FROM chunk_fts"
    " JOIN chunks c ON c.rowid = chunk_fts.rowid"
    " WHERE chunk_fts MATCH ?1 AND c.user = ?2 AND c.collection = ?3"
    " AND (?4 IS NULL OR c.document_id IN (SELECT id FROM temp.scope_docs))"
    " AND (?5 IS NULL OR c.id IN (SELECT value FROM json_each(?5))) ORDER BY s DESC, c.id LIMIT ?6"
)
SCOPE_VECTORS = (
    "SELECT c.id, c.vec FROM chunks c INDEXED BY chunks_doc WHERE c.user = ? AND c.collection = ?"
    " AND c.document_id IN (SELECT id FROM temp.scope_docs)"
)
VECTORS = (
    "SELECT c.id, c.vec FROM chunks c WHERE c.user = ?1 AND c.collection = ?2"
    " AND c.id IN (SELECT value FROM json_each(?3))"
    " AND (?4 IS NULL OR c.document_id IN (SELECT id FROM temp.scope_docs))"
)
IN_SCOPE_MENTION = (
    "SELECT 1 FROM mentions WHERE user = ?1 AND collection = ?2 AND entity = ?3"
    " AND (?4 IS NULL OR document_id IN (SELECT id FROM temp.scope_docs)) LIMIT 1"
)
SUBJECT_CHUNKS = (
    "SELECT chunk_id FROM chunk_subjects WHERE user = ?1 AND collection = ?2 AND entity = ?3"
    " AND (?4 IS NULL OR document_id IN (SELECT id FROM temp.scope_docs)) LIMIT ?5"
)
MENTIONING = (
    "SELECT chunk_id FROM mentions WHERE user = ?1 AND collection = ?2 AND entity = ?3"
    " AND (?4 IS NULL OR document_id IN (SELECT id FROM temp.scope_docs)) LIMIT ?5"
)
SOURCES = (
    "SELECT c.id, c.text, d.title_entity FROM chunks c JOIN documents d ON d.user = c.user"
    " AND d.collection = c.collection AND d.id = c.document_id WHERE c.user = ? AND c.collection = ?"
    " AND c.id IN (SELECT value FROM json_each(?))"
)
SOURCE_MENTIONS = (
    "SELECT m.chunk_id, m.entity FROM mentions m INDEXED BY mentions_by_chunk WHERE m.user = ? AND m.collection = ?"
    " AND m.chunk_id IN (SELECT value FROM json_each(?))"
)


def fts_query(tenant: Tenant, terms: Sequence[str]) -> str | None:
    """The FTS5 query for chunks of the collection holding any of `terms`, each an FTS5 string
    (quoted, its quotes doubled: data, never syntax); None when no term is left to search."""
    words = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
    return f"tenant : {tenant_token(tenant)} AND terms : ({words})" if words else None


def set_scope(conn: sqlite3.Connection, allowed: Collection[str] | None) -> int | None:
    """Fill `temp.scope_docs` with the scope's documents; the query flag (None: no scope)."""
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS scope_docs (id TEXT PRIMARY KEY) WITHOUT ROWID")
    conn.execute("DELETE FROM temp.scope_docs")
    if allowed is not None:
        conn.executemany("INSERT OR IGNORE INTO temp.scope_docs VALUES (?)", [(d,) for d in allowed])
    # The writes above opened a transaction (sqlite3's implicit BEGIN): end it, or this read
    # connection would keep its snapshot of the file and never see another writer's rows.
    conn.commit()
    return None if allowed is None else 1


def cosines(rows: Sequence[tuple[str, bytes]], q: np.ndarray) -> dict[str, float]:
    """Chunk id -> cosine of its stored vector to unit `q` (a zero vector scores 0)."""
    if not rows:
        return {}
    m = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
    norms = np.linalg.norm(m, axis=1)
    sims = (m @ q) / np.where(norms == 0, 1.0, norms)
    return dict(zip((r[0] for r in rows), sims.tolist(), strict=True))


def similarities(
    conn: sqlite3.Connection, tenant: Tenant, q: np.ndarray, ids: Sequence[str], scoped: int | None
) -> dict[str, float]:
    """Cosine of unit `q` to each chunk of `ids` (in scope)."""
    if not ids:
        return {}
    return cosines(conn.execute(VECTORS, (tenant.user, tenant.collection, json.dumps(list(ids)), scoped)).fetchall(), q)


def candidates(
    conn: sqlite3.Connection, vl: VectorLists, tenant: Tenant, q: np.ndarray | None,
    terms: Sequence[str], k: int, scope: tuple[int | None, int], among: Sequence[str] | None,
) -> Candidates:  # fmt: skip
    """The `k` nearest chunks (IVF, or exactly within a small scope or `among` given chunks) and
    the `k` best by BM25, each with its cosine; `scope` is (flag, chunks in it)."""
    scoped, searched = scope
    dense: dict[str, float] = {}
    if q is not None and not (among is not None and not among):
        if among is not None:
            sims = similarities(conn, tenant, q, among, scoped)
        elif scoped is not None and searched <= EXACT_SCOPE:
            sims = cosines(conn.execute(SCOPE_VECTORS, (tenant.user, tenant.collection)).fetchall(), q)
        else:
            allowed = None if scoped is None else {r[0] for r in conn.execute("SELECT id FROM temp.scope_docs")}
            hits = vl.search(conn, tenant, CHUNK_SPACE, q, RESCORE * k, allowed)
            sims = similarities(conn, tenant, q, [i for i, _ in hits], scoped)
        ids = list(sims)
        best = top_k(np.asarray([sims[i] for i in ids], dtype=np.float64), k).tolist()
        dense = {ids[i]: sims[ids[i]] for i in best}
    lexical: dict[str, float] = {}
    terms = query_terms(terms)
    query = fts_query(tenant, terms)
    if query is not None and not (among is not None and not among):
        args = (query, tenant.user, tenant.collection, scoped,
                None if among is None else json.dumps(list(among)), RESCORE * k)  # fmt: skip
        hits = conn.execute(LEXICAL, args).fetchall()
        lexical = best_bm25([(i, words.split()) for i, words, _ in hits], terms, bm25_stats(conn, tenant, terms), k)
    missing = [i for i in lexical if i not in dense]
    if q is not None and missing:
        dense.update(similarities(conn, tenant, q, missing, scoped))
    ids = list(dict.fromkeys([*dense, *lexical]))
    return Candidates([Passage(i, dense.get(i, 0.0), lexical.get(i, 0.0)) for i in ids], searched)


def named(
    conn: sqlite3.Connection, tenant: Tenant, phrases: Sequence[str], q: np.ndarray, scoped: int | None
) -> dict[str, tuple[str, list[Passage]]]:
    """Of `phrases`, the concept keys present in the scope: key -> (concept, its best subject chunks)."""
    if not phrases:
        return {}
    out: dict[str, tuple[str, list[Passage]]] = {}
    for key, iri in concepts_by_key(conn, tenant, phrases).items():
        if conn.execute(IN_SCOPE_MENTION, (tenant.user, tenant.collection, iri, scoped)).fetchone() is None:
            continue
        out[key] = (iri, _subjects(conn, tenant, iri, q, scoped))
    return out


def concepts_by_key(conn: sqlite3.Connection, tenant: Tenant, keys: Sequence[str]) -> dict[str, str]:
    """Key -> the one concept it is a key or an alias of (a key naming several names none)."""
    found: dict[str, list[str]] = {}
    for key, iri in conn.execute(CONCEPT_KEYS, (tenant.user, tenant.collection, json.dumps(list(keys)))):
        found.setdefault(key, []).append(iri)
    return {k: iris[0] for k, iris in found.items() if len(iris) == 1}


def _subjects(conn: sqlite3.Connection, tenant: Tenant, iri: str, q: np.ndarray, scoped: int | None) -> list[Passage]:
    """The chunks whose subject `iri` is (in scope), the SUBJECT_KEEP nearest `q`."""
    ids = [r[0] for r in conn.execute(SUBJECT_CHUNKS, (tenant.user, tenant.collection, iri, scoped, SUBJECT_READ))]
    sims = similarities(conn, tenant, q, ids, scoped)
    best = sorted(sims, key=lambda c: (-sims[c], c))[:SUBJECT_KEEP]
    return [Passage(c, sims[c]) for c in best]


def links(
    conn: sqlite3.Connection, tenant: Tenant, chunk_ids: Sequence[str], skip: Collection[str],
    cap: int, known: Collection[str], q: np.ndarray, scoped: int | None,
) -> HopLinks:  # fmt: skip
    """One hop of graphrank from `chunk_ids`: each source's concepts (mentions, and the subject
    concepts its text names, its own subject left out), each concept's subjects and — when in
    at most `cap` chunks of the scope — its chunks, and the cosine of every chunk reached."""
    hop = HopLinks()
    if not chunk_ids:
        return hop
    sources = conn.execute(SOURCES, (tenant.user, tenant.collection, json.dumps(list(chunk_ids)))).fetchall()
    own = {cid: subject for cid, _, subject in sources}
    for cid, entity in conn.execute(SOURCE_MENTIONS, (tenant.user, tenant.collection, json.dumps(list(chunk_ids)))):
        if entity != own.get(cid):
            hop.concepts_of.setdefault(cid, []).append(entity)
    for cid, entity in _named_subjects(conn, tenant, sources, scoped):
        have = hop.concepts_of.setdefault(cid, [])
        if entity != own.get(cid) and entity not in have:
            have.append(entity)
    wanted = sorted({c for cs in hop.concepts_of.values() for c in cs} - set(skip))
    subjects: dict[str, list[str]] = {}
    for c in wanted:
        chunks = [r[0] for r in conn.execute(MENTIONING, (tenant.user, tenant.collection, c, scoped, cap + 1))]
        subjects[c] = [
            r[0] for r in conn.execute(SUBJECT_CHUNKS, (tenant.user, tenant.collection, c, scoped, SUBJECT_READ))
        ]
        hop.concepts[c] = ConceptLinks(len(chunks), subjects[c], chunks if len(chunks) <= cap else [])
    reached = {j for link in hop.concepts.values() for j in (*link.subjects, *link.chunks)} - set(known)
    sims = similarities(conn, tenant, q, sorted(reached), scoped)
    hop.passages = [Passage(c, s) for c, s in sims.items()]
    return hop


def _named_subjects(
    conn: sqlite3.Connection, tenant: Tenant, sources: Sequence[tuple[str, str, str | None]],
    scoped: int | None,
) -> list[tuple[str, str]]:  # fmt: skip
    """(source chunk, concept) for each subject concept (one with a subject chunk in scope) whose
    key the source's text names as whole words."""
    runs: dict[str, set[str]] = {}
    for cid, text, _ in sources:
        for run in name_runs(text):
            runs.setdefault(run, set()).add(cid)
    if not runs:
        return []
    out = []
    for key, iri in concepts_by_key(conn, tenant, list(runs)).items():
        if conn.execute(SUBJECT_CHUNKS, (tenant.user, tenant.collection, iri, scoped, 1)).fetchone() is not None:
            out += [(cid, iri) for cid in sorted(runs[key])]
    return out
