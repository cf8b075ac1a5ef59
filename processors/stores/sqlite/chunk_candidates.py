"""Chunk candidates for one or several questions from the embedded document store's own indexes:
the IVF lists over chunk vectors (vector_lists.py) and FTS5 over the chunks' BM25 terms, each
candidate with its cosine from the stored float vectors. Several questions (a follow-up round)
share one read and its statements: the BM25 statistics, the full-text queries, the IVF version
check and the stored vectors are each read once for all of them. The scope is a predicate inside
every query (`temp.scope_docs`, passages.set_scope)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Sequence

import numpy as np

from processors.algorithms.bm25 import Bm25Stats, best_bm25, query_terms
from processors.algorithms.passage_rank import Candidates, Passage
from processors.algorithms.vectors import top_k
from processors.stores.sqlite.docs_schema import CHUNK_SPACE, scope_size
from processors.stores.sqlite.passages import RESCORE, VECTORS, cosines_many, fts_query
from processors.stores.sqlite.vector_lists import VectorLists
from schemas.tenant import Tenant

EXACT_SCOPE = 50_000  # a scope of at most this many chunks is searched exactly (all its vectors read)
# The chunks a question's full-text query may match, summed over its terms (term_df), rarest
# first (`searched_terms`): the common terms past it score the hits, they match none. Replaying 240
# captured lazy-rag rounds (120 public questions, issue 38), paired with the matching of every
# term: at the bench's 10k corpus 1,005 of 1,026 queries keep their top k; at a 100k copy of it the
# lexical stage takes 6.5x less time and 759 keep it (2,000 cut more time and moved more, 8,000 less).
POSTINGS_BUDGET = 4_000
Question = tuple[np.ndarray | None, Sequence[str]]  # a unit question vector (or None) and its BM25 terms

# Each full-text query of ?1 (a JSON array: its index is `n`), its best ?6 hits by BM25 (ties by
# id) among the tenant's chunks in scope (and of ?5, a JSON array of chunk ids, or null), with
# their terms: one statement for a round's questions. bm25() cannot sit under a window function,
# hence the materialised hits; CROSS JOIN keeps each query's full-text lookup the outer loop. The
# terms are read for the kept hits only, by rowid (reading them for every match cost a follow-up
# round's statement 40% of its time).
LEXICAL = (
    "WITH hits AS MATERIALIZED (SELECT q.key AS n, c.id AS id, chunk_fts.rowid AS fts_row,"
    " -bm25(chunk_fts, 0.0, 1.0) AS s FROM json_each(?1) q CROSS JOIN chunk_fts CROSS JOIN chunks c"
    " WHERE chunk_fts MATCH q.value AND c.rowid = chunk_fts.rowid AND c.user = ?2 AND c.collection = ?3"
    " AND (?4 IS NULL OR c.document_id IN (SELECT id FROM temp.scope_docs))"
    " AND (?5 IS NULL OR c.id IN (SELECT value FROM json_each(?5))))"
    " SELECT n, id, (SELECT terms FROM chunk_fts f WHERE f.rowid = fts_row) FROM (SELECT n, id, fts_row, s,"
    " row_number() OVER (PARTITION BY n ORDER BY s DESC, id) AS r FROM hits) WHERE r <= ?6 ORDER BY n, s DESC, id"
)
# LEXICAL for a whole collection (no scope, no `among`): the tenant token inside each full-text
# query already keeps the hits the tenant's (or no other tenant has rows: `fts_query`), so a
# chunk's row is read for the kept hits only (the tenant checked again there) and not for every
# match: a quarter of the statement's time at 10k. Ties at the cut go by rowid. (Another
# collection's first write between the statistics and this statement can only take kept hits
# away, by that check: never add one.)
LEXICAL_COLLECTION = (
    "WITH hits AS MATERIALIZED (SELECT q.key AS n, chunk_fts.rowid AS fts_row, -bm25(chunk_fts, 0.0, 1.0) AS s"
    " FROM json_each(?1) q CROSS JOIN chunk_fts WHERE chunk_fts MATCH q.value)"
    " SELECT n, c.id, f.terms FROM (SELECT n, fts_row, s, row_number() OVER (PARTITION BY n ORDER BY s DESC, fts_row)"
    " AS r FROM hits) h CROSS JOIN chunks c CROSS JOIN chunk_fts f ON c.rowid = h.fts_row AND f.rowid = h.fts_row"
    " WHERE h.r <= ?4 AND c.user = ?2 AND c.collection = ?3 ORDER BY n, s DESC, c.id"
)
SCOPE_VECTORS = (
    "SELECT c.id, c.vec FROM chunks c INDEXED BY chunks_doc WHERE c.user = ? AND c.collection = ?"
    " AND c.document_id IN (SELECT id FROM temp.scope_docs)"
)
# The collection's kept BM25 statistics in one statement: its chunk and term counts (kind 0), the
# chunks of every collection of the file (kind 1: whether the collection holds the whole full-text
# index), then the chunks holding each term of ?3 (kind 2; JSON array).
BM25_STATS = (
    "SELECT 0, NULL, chunks, terms FROM collection_counts WHERE user = ?1 AND collection = ?2 UNION ALL"
    " SELECT 1, NULL, total(chunks), 0 FROM collection_counts UNION ALL"
    " SELECT 2, term, df, 0 FROM term_df WHERE user = ?1 AND collection = ?2"
    " AND term IN (SELECT value FROM json_each(?3))"
)


def candidates(
    conn: sqlite3.Connection, vl: VectorLists, tenant: Tenant, questions: Sequence[Question], k: int,
    scope: tuple[int | None, Collection[str] | None], among: Sequence[str] | None,
) -> list[Candidates]:  # fmt: skip
    """For each question, the `k` nearest chunks (IVF, or exactly within a small scope or `among`
    given chunks) and the `k` best by BM25, each with its cosine; `scope` is the query flag and
    the scope's documents (None, None: the collection). Unscoped, four statements whatever the
    number of questions: the statistics, the full-text queries, the IVF version check and one
    read of stored vectors (rescoring the IVF hits and giving the lexical hits their cosines)."""
    scoped, allowed = scope
    terms = [query_terms(ts) for _, ts in questions]
    stats, whole_index = bm25_stats(conn, tenant, sorted({w for ts in terms for w in ts}))
    searched = stats.chunks if allowed is None else scope_size(conn, tenant, allowed)
    searched = len(among) if among is not None else searched
    if among is not None and not among:
        return [Candidates([], searched) for _ in questions]
    lexical = _lexical(conn, tenant, terms, k, (scoped, among), (stats, whole_index))
    pools, vectors = _pools(conn, vl, tenant, [q for q, _ in questions], k, (scoped, searched), among)
    wanted = {i for pool, lex in zip(pools, lexical, strict=True) if pool is not None for i in [*pool, *lex]}
    if wanted and vectors is None:
        vectors = conn.execute(VECTORS, (tenant.user, tenant.collection, json.dumps(sorted(wanted)), scoped)).fetchall()
    ranked = [q for (q, _), pool in zip(questions, pools, strict=True) if q is not None and pool is not None]
    each = iter(cosines_many(vectors or [], ranked))  # the vectors decoded once for every question
    out = []
    for (q, _), pool, lex in zip(questions, pools, lexical, strict=True):
        dense: dict[str, float] = {}
        if q is not None and pool is not None:
            cos = next(each)
            in_pool = set(pool)
            ids = [i for i in cos if i in in_pool]  # in the order the vectors were read: ties go to the first
            best = top_k(np.asarray([cos[i] for i in ids], dtype=np.float64), k).tolist()
            dense = {ids[i]: cos[ids[i]] for i in best}
            dense.update({i: cos[i] for i in lex if i not in dense and i in cos})
        ids = list(dict.fromkeys([*dense, *lex]))
        out.append(Candidates([Passage(i, dense.get(i, 0.0), lex.get(i, 0.0)) for i in ids], searched))
    return out


def _lexical(
    conn: sqlite3.Connection, tenant: Tenant, terms: Sequence[Sequence[str]], k: int,
    scope: tuple[int | None, Sequence[str] | None], stats: tuple[Bm25Stats, bool],
) -> list[dict[str, float]]:  # fmt: skip
    """For each question's terms, the `k` best chunks by BM25 (of `among`, when given), with the
    collection's statistics: one statement for all, and a second for the questions whose
    searched terms found fewer than `k` chunks (searching the rest of their terms).

    A term in many chunks made the full-text query read and score a large share of the
    collection (issue 38: a third of a question's time at 10k chunks), so a question searches
    its rarest terms up to POSTINGS_BUDGET chunks (`searched_terms`); each hit is still scored
    with all its terms, and a chunk holding only the common terms is found no more. `stats`: the
    collection's, and whether it holds the whole full-text index (`bm25_stats`)."""
    searched = [searched_terms(ts, stats[0]) for ts in terms]
    best = _searched(conn, tenant, searched, terms, k, scope, stats)
    short = [len(b) < k for b in best]
    rest = [[t for t in ts if t not in s] if few else [] for ts, s, few in zip(terms, searched, short, strict=True)]
    if not any(rest):
        return best
    more = _searched(conn, tenant, rest, terms, k, scope, stats)
    return [_top(b | m, k) for b, m in zip(best, more, strict=True)]


def searched_terms(terms: Sequence[str], stats: Bm25Stats) -> list[str]:
    """The question's terms its full-text query matches: its rarest, while the chunks holding them
    add up to at most POSTINGS_BUDGET (all of them in a collection that small, the rarest at least)."""
    held, kept = 0, set()
    for t in sorted(terms, key=lambda t: (stats.df.get(t, 0), t)):
        held += stats.df.get(t, 0)
        if kept and held > POSTINGS_BUDGET:
            break
        kept.add(t)
    return [t for t in terms if t in kept]


def _top(scores: dict[str, float], k: int) -> dict[str, float]:
    """The `k` best of `scores`, best first (ties by id, as `best_bm25` ranks)."""
    return dict(sorted(scores.items(), key=lambda x: (-x[1], x[0]))[:k])


def _searched(
    conn: sqlite3.Connection, tenant: Tenant, searched: Sequence[Sequence[str]], terms: Sequence[Sequence[str]],
    k: int, scope: tuple[int | None, Sequence[str] | None], stats: tuple[Bm25Stats, bool],
) -> list[dict[str, float]]:  # fmt: skip
    """For each question, the `k` best by BM25 over all its `terms` of the chunks holding one of
    its `searched` terms (none searched: no chunk): one statement for all."""
    scoped, among = scope
    collection, whole_index = stats
    queries = [fts_query(tenant, ts, whole_index) for ts in searched]
    asked = [(n, q) for n, q in enumerate(queries) if q is not None]
    hits: list[list[tuple[str, list[str]]]] = [[] for _ in terms]
    if asked:
        args: tuple[object, ...] = (json.dumps([q for _, q in asked]), tenant.user, tenant.collection)
        if scoped is None and among is None:
            rows = conn.execute(LEXICAL_COLLECTION, (*args, RESCORE * k))
        else:
            rows = conn.execute(
                LEXICAL, (*args, scoped, None if among is None else json.dumps(list(among)), RESCORE * k)
            )
        for n, i, words in rows:
            hits[asked[n][0]].append((i, words.split()))
    return [best_bm25(h, ts, collection, k) if h else {} for h, ts in zip(hits, terms, strict=True)]


def _pools(
    conn: sqlite3.Connection, vl: VectorLists, tenant: Tenant, qs: Sequence[np.ndarray | None], k: int,
    scope: tuple[int | None, int], among: Sequence[str] | None,
) -> tuple[list[list[str] | None], list[tuple[str, bytes]] | None]:  # fmt: skip
    """Each question's dense pool (None: no vector): `among`, a small scope's chunks (whose
    vectors are then read here, once) or the IVF hits; and the vectors read, if any."""
    scoped, searched = scope
    if among is not None:
        return [None if q is None else list(among) for q in qs], None
    if scoped is not None and searched <= EXACT_SCOPE:
        if all(q is None for q in qs):
            return [None for _ in qs], None
        rows = conn.execute(SCOPE_VECTORS, (tenant.user, tenant.collection)).fetchall()
        return [None if q is None else [r[0] for r in rows] for q in qs], rows
    allowed = None if scoped is None else {r[0] for r in conn.execute("SELECT id FROM temp.scope_docs")}
    asked = [q for q in qs if q is not None]
    found = iter(vl.search_many(conn, tenant, CHUNK_SPACE, asked, RESCORE * k, allowed))
    return [None if q is None else [i for i, _ in next(found)] for q in qs], None


def bm25_stats(conn: sqlite3.Connection, tenant: Tenant, terms: Sequence[str]) -> tuple[Bm25Stats, bool]:
    """The collection's kept BM25 statistics for these terms (zeros for an empty collection), and
    whether the collection holds every chunk of the file (its full-text queries need no tenant
    phrase: `fts_query`)."""
    chunks, total, everyone, df = 0, 0, 0, {}
    for kind, term, n, m in conn.execute(BM25_STATS, (tenant.user, tenant.collection, json.dumps(list(terms)))):
        if kind == 0:
            chunks, total = int(n), int(m)
        elif kind == 1:
            everyone = int(n)
        else:
            df[str(term)] = int(n)
    return Bm25Stats(chunks, total, df), chunks > 0 and chunks == everyone
