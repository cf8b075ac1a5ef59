"""What graphrank and chunk search read from the embedded document store for one question
(algorithms/passage_rank.PassageSource): candidates from the store's own indexes — the IVF lists
over chunk vectors (vector_lists.py) and FTS5 over the chunks' BM25 terms — the concepts a
question names, and one hop's links. Each function runs inside one read call (one connection,
one thread); the scope is a predicate inside every query (`temp.scope_docs`, filled per call)."""

from __future__ import annotations

import json
import sqlite3
import weakref
from collections.abc import Collection, Sequence

import numpy as np
from pydantic import TypeAdapter

from processors.algorithms.passage_rank import ConceptLinks, HopLinks, Passage, name_runs
from processors.stores.documents_protocol import tenant_token
from processors.stores.sqlite.docs_schema import ENTITY_LINKS, LINKS_READ, vec_of
from processors.stores.sqlite.mention_rows import ID as MENTION_ID
from processors.stores.sqlite.mention_rows import IN_SCOPE as MENTION_IN_SCOPE
from processors.stores.sqlite.mention_rows import KEY_OF_CHUNK
from processors.stores.sqlite.mention_rows import OF_CHUNKS as CHUNK_LINKS
from schemas.documents import Mention
from schemas.tenant import Tenant

# The connections whose `temp.scope_docs` exists (a temp table lives as long as its connection).
_SCOPE_TABLES: weakref.WeakSet[sqlite3.Connection] = weakref.WeakSet()
RESCORE = 4  # IVF hits read per wanted hit, rescored with the stored float vectors
SUBJECT_READ = 512  # subject chunks of one concept read, the best SUBJECT_KEEP kept by cosine
SUBJECT_KEEP = 64
_MENTIONS = TypeAdapter(list[Mention])

VECTORS = (
    "SELECT c.id, c.vec FROM chunks c WHERE c.user = ?1 AND c.collection = ?2"
    " AND c.id IN (SELECT value FROM json_each(?3))"
    " AND (?4 IS NULL OR c.document_id IN (SELECT id FROM temp.scope_docs))"
)
_IN_SCOPE = "(?4 IS NULL OR document_id IN (SELECT id FROM temp.scope_docs))"
# A concept's first ?N chunks (mentioning it, or whose subject it is) in scope, as one JSON array:
# a correlated subquery keeps each concept's own LIMIT, so one statement reads every concept's.
_MENTIONING = (
    "(SELECT json_group_array(id) FROM (SELECT c.id FROM chunk_mentions m CROSS JOIN chunks c WHERE m.entity = "
    + MENTION_ID.format("{e}") + " AND " + MENTION_IN_SCOPE + " LIMIT {n}))"
)  # fmt: skip
_SUBJECTS = (
    "(SELECT json_group_array(chunk_id) FROM (SELECT chunk_id FROM chunk_subjects WHERE user = ?1"
    " AND collection = ?2 AND entity = {e} AND " + _IN_SCOPE + " LIMIT {n}))"
)
# Each concept (?3: JSON array) with its first ?5 chunks and its first ?6 subject chunks in scope.
CONCEPT_LINKS = (
    "SELECT k.value, " + _MENTIONING.format(e="k.value", n="?5") + ", " + _SUBJECTS.format(e="k.value", n="?6")
    + " FROM json_each(?3) k"
)  # fmt: skip
# CONCEPT_LINKS for a whole collection (?4 null): each concept's mentions counted up to ?5 from the
# mention keys alone, its chunks (a chunk row each, for its id) and subjects read only when fewer:
# a concept in more chunks carries no hop, and at 1M chunks nearly every concept a hop meets is one
# (issue 38: 65 chunk rows and up to SUBJECT_READ subjects, each then a stored vector read, for
# every such concept). An entity id is the tenant's own (`iri_ids`), and so is every chunk that
# mentions it.
_MENTION_COUNT = (
    "(SELECT count(*) FROM (SELECT 1 FROM chunk_mentions m WHERE m.entity = " + MENTION_ID.format("k.value")
    + " LIMIT ?5))"
)  # fmt: skip
CONCEPT_LINKS_COLLECTION = (
    "WITH d AS MATERIALIZED (SELECT k.value AS value, " + _MENTION_COUNT + " AS df FROM json_each(?3) k)"
    " SELECT value, df, CASE WHEN df < ?5 THEN " + _MENTIONING.format(e="value", n="?5") + " ELSE '[]' END,"
    " CASE WHEN df < ?5 THEN " + _SUBJECTS.format(e="value", n="?6") + " ELSE '[]' END FROM d"
)  # fmt: skip
# The concepts keyed by the phrases (?3: JSON array) with whether a chunk in scope mentions each
# and its first ?5 subject chunks in scope (a key of several concepts names none: the caller drops it).
NAMED = (
    "SELECT ck.key, ck.iri, EXISTS (SELECT 1 FROM chunk_mentions m CROSS JOIN chunks c WHERE m.entity = "
    + MENTION_ID.format("ck.iri") + " AND " + MENTION_IN_SCOPE + "), " + _SUBJECTS.format(e="ck.iri", n="?5")
    + " FROM concept_keys ck WHERE ck.user = ?1 AND ck.collection = ?2 AND ck.key IN (SELECT value FROM json_each(?3))"
)  # fmt: skip
# The concepts keyed by the word runs (?3) with whether a chunk in scope has each as its subject.
NAMED_SUBJECTS = (
    "SELECT ck.key, ck.iri, EXISTS (SELECT 1 FROM chunk_subjects WHERE user = ?1 AND collection = ?2"
    " AND entity = ck.iri AND " + _IN_SCOPE + ") FROM concept_keys ck WHERE ck.user = ?1 AND ck.collection = ?2"
    " AND ck.key IN (SELECT value FROM json_each(?3))"
)
SOURCES = (
    "SELECT c.id, c.text, d.title_entity FROM chunks c JOIN documents d ON d.user = c.user"
    " AND d.collection = c.collection AND d.id = c.document_id WHERE c.user = ? AND c.collection = ?"
    " AND c.id IN (SELECT value FROM json_each(?))"
)
# What the chunks (?3: JSON array) mention: (chunk id, entity).
SOURCE_MENTIONS = (
    "SELECT c.id, e.iri FROM chunks c CROSS JOIN chunk_mentions m INDEXED BY chunk_mentions_by_chunk"
    " CROSS JOIN iri_ids e WHERE c.user = ?1 AND c.collection = ?2 AND c.id IN (SELECT value FROM json_each(?3))"
    " AND m.chunk = " + KEY_OF_CHUNK + " AND e.id = m.entity"
)


def fts_query(tenant: Tenant, terms: Sequence[str], whole_index: bool = False) -> str | None:
    """The FTS5 query for chunks of the collection holding any of `terms`, each an FTS5 string
    (quoted, its quotes doubled: data, never syntax); None when no term is left to search.

    `whole_index`: the collection holds every row of the index, so the tenant phrase would filter
    nothing, and it is left out. It is not free: bm25() counts the rows of every phrase of the
    query for its IDF, and the tenant phrase's rows are the whole collection (100 ms a query at
    1M chunks, issue 38). Its weight is 0, so the scores are the same without it; the statement
    still checks each kept hit's tenant on its chunk row."""
    words = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
    if not words:
        return None
    return f"terms : ({words})" if whole_index else f"tenant : {tenant_token(tenant)} AND terms : ({words})"


def set_scope(conn: sqlite3.Connection, allowed: Collection[str] | None) -> int | None:
    """The query flag of a scope (None: no scope); with one, `temp.scope_docs` holds its documents.
    Unscoped, no statement runs (the table, made once per connection, is not read: the flag is NULL)."""
    if conn not in _SCOPE_TABLES:
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS scope_docs (id TEXT PRIMARY KEY) WITHOUT ROWID")
        _SCOPE_TABLES.add(conn)
    if allowed is None:
        return None
    conn.execute("DELETE FROM temp.scope_docs")
    conn.executemany("INSERT OR IGNORE INTO temp.scope_docs VALUES (?)", [(d,) for d in allowed])
    # The writes above opened a transaction (sqlite3's implicit BEGIN): end it, or this read
    # connection would keep its snapshot of the file and never see another writer's rows.
    conn.commit()
    return 1


def cosines(rows: Sequence[tuple[str, bytes]], q: np.ndarray) -> dict[str, float]:
    """Chunk id -> cosine of its stored vector to unit `q` (a zero vector scores 0)."""
    return cosines_many(rows, [q])[0]


def cosines_many(rows: Sequence[tuple[str, bytes]], qs: Sequence[np.ndarray]) -> list[dict[str, float]]:
    """`cosines` for each unit vector of `qs`, the rows decoded (and their norms taken) once for
    all: a follow-up round's questions share one read of their candidates' vectors."""
    if not rows:
        return [{} for _ in qs]
    m = stacked([r[1] for r in rows])
    norms = np.linalg.norm(m, axis=1)
    denominators = np.where(norms == 0, 1.0, norms)
    ids = [r[0] for r in rows]
    return [dict(zip(ids, ((m @ q) / denominators).tolist(), strict=True)) for q in qs]


def stacked(blobs: Sequence[bytes]) -> np.ndarray:
    """Stored chunk vectors (docs_schema.vec_of) as the rows of one float32 matrix, the same
    values `vec_of` gives: decoded in one numpy pass when they share a length (a file's vectors
    do), instead of one small array per row (a third of a question's vector reads was that)."""
    size = len(blobs[0])
    if any(len(b) != size for b in blobs):
        return np.stack([vec_of(b) for b in blobs])
    raw = np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(len(blobs), size)
    if size % 2:  # float16 and its trailing mark byte
        return np.ascontiguousarray(raw[:, : size - 1]).view(np.float16).astype(np.float32)
    return raw.view(np.float32)


def similarities(
    conn: sqlite3.Connection, tenant: Tenant, q: np.ndarray, ids: Sequence[str], scoped: int | None
) -> dict[str, float]:
    """Cosine of unit `q` to each chunk of `ids` (in scope)."""
    if not ids:
        return {}
    return cosines(conn.execute(VECTORS, (tenant.user, tenant.collection, json.dumps(list(ids)), scoped)).fetchall(), q)


def named(
    conn: sqlite3.Connection, tenant: Tenant, phrases: Sequence[str], q: np.ndarray, scoped: int | None
) -> dict[str, tuple[str, list[Passage]]]:
    """Of `phrases`, the concept keys present in the scope: key -> (concept, its best subject
    chunks, the SUBJECT_KEEP nearest `q` of its first SUBJECT_READ). Two statements."""
    if not phrases:
        return {}
    rows = conn.execute(NAMED, (tenant.user, tenant.collection, json.dumps(list(phrases)), scoped, SUBJECT_READ))
    found = _one_concept_keys(rows.fetchall())
    found = {key: row for key, row in found.items() if row[2]}  # a chunk in scope mentions it
    subjects = {key: json.loads(row[3]) for key, row in found.items()}
    sims = similarities(conn, tenant, q, sorted({c for ids in subjects.values() for c in ids}), scoped)
    out: dict[str, tuple[str, list[Passage]]] = {}
    for key, row in found.items():
        best = sorted((c for c in subjects[key] if c in sims), key=lambda c: (-sims[c], c))[:SUBJECT_KEEP]
        out[key] = (row[1], [Passage(c, sims[c]) for c in best])
    return out


def _one_concept_keys(rows: Sequence[tuple]) -> dict[str, tuple]:  # type: ignore[type-arg]
    """Key -> its row, for the keys of exactly one concept (a key naming several names none)."""
    found: dict[str, list[tuple]] = {}  # type: ignore[type-arg]
    for row in rows:
        found.setdefault(row[0], []).append(row)
    return {k: rs[0] for k, rs in found.items() if len(rs) == 1}


def links(
    conn: sqlite3.Connection, tenant: Tenant, chunk_ids: Sequence[str], skip: Collection[str],
    cap: int, known: Collection[str], q: np.ndarray, scoped: int | None,
) -> HopLinks:  # fmt: skip
    """One hop of graphrank from `chunk_ids`: each source's concepts (mentions, and the subject
    concepts its text names, its own subject left out), each concept's subjects and chunks when
    it is in at most `cap` chunks of the scope (more: it carries no hop, so neither is read, and
    graphrank ranks no chunk a hop reaches through it), and the cosine of every chunk reached.
    Five statements, whatever the number of sources and concepts."""
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
    if wanted:
        args = (tenant.user, tenant.collection, json.dumps(wanted), scoped, cap + 1, SUBJECT_READ)
        if scoped is None:
            rows = [(c, df, json.loads(m), s) for c, df, m, s in conn.execute(CONCEPT_LINKS_COLLECTION, args)]
        else:
            rows = [(c, len(ms), ms, s) for c, m, s in conn.execute(CONCEPT_LINKS, args) for ms in [json.loads(m)]]
        for c, df, chunks, subjects in rows:
            hop.concepts[c] = ConceptLinks(df, json.loads(subjects), chunks) if df <= cap else ConceptLinks(df)
    reached = {j for link in hop.concepts.values() for j in (*link.subjects, *link.chunks)} - set(known)
    sims = similarities(conn, tenant, q, sorted(reached), scoped)
    hop.passages = [Passage(c, s) for c, s in sims.items()]
    return hop


def _named_subjects(
    conn: sqlite3.Connection, tenant: Tenant, sources: Sequence[tuple[str, str, str | None]],
    scoped: int | None,
) -> list[tuple[str, str]]:  # fmt: skip
    """(source chunk, concept) for each subject concept (one with a subject chunk in scope) whose
    key the source's text names as whole words (one statement)."""
    runs: dict[str, set[str]] = {}
    for cid, text, _ in sources:
        for run in name_runs(text):
            runs.setdefault(run, set()).add(cid)
    if not runs:
        return []
    rows = conn.execute(NAMED_SUBJECTS, (tenant.user, tenant.collection, json.dumps(list(runs)), scoped)).fetchall()
    out = []
    for key, (_, iri, has_subject) in _one_concept_keys(rows).items():
        if has_subject:
            out += [(cid, iri) for cid in sorted(runs[key])]
    return out


def mention_links(
    conn: sqlite3.Connection, tenant: Tenant, entities: Sequence[str], chunk_ids: Sequence[str],
    per_entity: int, scope: tuple[int | None, Collection[str] | None],
) -> list[Mention]:  # fmt: skip
    """Chunk-entity links of a neighbourhood (two statements): of each entity's first LINKS_READ
    mentions in scope, the `per_entity` most mentioning; every mention of the chunks. `scope`:
    the query flag and the scope's documents."""
    scoped, allowed = scope
    rows: list[tuple[str, str, int]] = []
    wanted = list(dict.fromkeys(entities))
    if wanted:
        args = (tenant.user, tenant.collection, json.dumps(wanted), scoped, max(per_entity, LINKS_READ), per_entity)
        read = {e: json.loads(found) for e, found in conn.execute(ENTITY_LINKS, args)}
        for e in wanted:
            rows += [(e, c, n) for c, n in sorted(read.get(e, []), key=lambda r: (-r[1], r[0]))[:per_entity]]
    if chunk_ids:
        docs = None if allowed is None else json.dumps(sorted(allowed))
        rows += conn.execute(CHUNK_LINKS, (tenant.user, tenant.collection, json.dumps(list(chunk_ids)), docs))
    # validated as one list (pydantic's loop): a neighbourhood is a thousand and more links, and
    # a model built one at a time cost twice as much (model_construct, in Python, four times)
    return _MENTIONS.validate_python([{"entity": e, "chunk_id": c, "count": n} for e, c, n in dict.fromkeys(rows)])
