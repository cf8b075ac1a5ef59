"""The SQLite store's BM25 candidates on a real docs.db: a question searches its rarest terms up
to the postings budget and still scores each hit with all its terms, falls back to its other
terms when the rare ones hold fewer than k chunks, never returns another collection's chunk
(the whole-collection statement checks the tenant on the kept hits only), and within the budget
ranks exactly as BM25 over every chunk holding a term. A collection alone in the index matches
without the tenant phrase and finds the same chunks in the same order."""

from __future__ import annotations

import random
import sqlite3
from collections import Counter

import pytest

from processors.algorithms.bm25 import Bm25Stats, best_bm25
from processors.stores.documents_protocol import tenant_token
from processors.stores.sqlite import chunk_candidates
from processors.stores.sqlite.chunk_candidates import bm25_stats, candidates, searched_terms
from processors.stores.sqlite.docs_schema import SCHEMA
from processors.stores.sqlite.passages import fts_query, set_scope
from processors.stores.sqlite.pool import CountedConnection
from processors.stores.sqlite.vector_lists import VectorLists
from schemas.tenant import Tenant

MINE, OTHER = Tenant("u", "mine"), Tenant("u", "other")
COMMON = ["film", "year", "band"]  # in most chunks
RARE = [f"rare{n}" for n in range(40)]  # each in a few chunks


def _chunks(seed: int, n: int) -> list[list[str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = [w for w in COMMON if rng.random() < 0.6] + rng.sample(RARE, rng.randint(0, 2))
        out.append(words * rng.randint(1, 2) + [f"filler{rng.randint(0, 30)}" for _ in range(rng.randint(3, 12))])
    return out


def _write(conn: sqlite3.Connection, tenant: Tenant, chunks: list[list[str]], first_rowid: int) -> None:
    df = Counter(w for words in chunks for w in set(words))
    for n, words in enumerate(chunks):
        rowid, cid = first_rowid + n, f"{tenant.collection}:{n}"
        conn.execute(
            "INSERT INTO chunks (rowid, user, collection, id, document_id, ordinal, text, start, end, tokens, vec)"
            " VALUES (?, ?, ?, ?, ?, 0, '', 0, 0, 0, x'')",
            (rowid, tenant.user, tenant.collection, cid, cid),
        )
        conn.execute(
            "INSERT INTO chunk_fts (rowid, tenant, terms) VALUES (?, ?, ?)",
            (rowid, tenant_token(tenant), " ".join(words)),
        )
    conn.execute(
        "INSERT INTO collection_counts VALUES (?, ?, ?, ?)",
        (tenant.user, tenant.collection, len(chunks), sum(map(len, chunks))),
    )
    conn.executemany(
        "INSERT INTO term_df VALUES (?, ?, ?, ?)", [(tenant.user, tenant.collection, t, d) for t, d in df.items()]
    )


@pytest.fixture
def store() -> tuple[CountedConnection, dict[str, list[str]]]:
    conn = sqlite3.connect(":memory:", factory=CountedConnection)
    conn.executescript(SCHEMA)
    mine = _chunks(1, 300)
    _write(conn, MINE, mine, 1)
    _write(conn, OTHER, _chunks(2, 300), 1001)  # the same terms in another collection of the index
    conn.commit()
    set_scope(conn, None)
    return conn, {f"mine:{n}": words for n, words in enumerate(mine)}


def _lexical(conn: sqlite3.Connection, terms: list[list[str]], k: int) -> list[dict[str, float]]:
    found = candidates(conn, VectorLists(), MINE, [(None, ts) for ts in terms], k, (None, None), None)
    return [{p.id: p.lexical for p in c.passages} for c in found]


def _exact(
    chunks: dict[str, list[str]], terms: list[str], stats: Bm25Stats, k: int, among: set[str]
) -> dict[str, float]:
    """BM25's top k over every chunk holding one of `among` (the terms searched), scored with all `terms`."""
    hits = [(i, words) for i, words in chunks.items() if among & set(words)]
    return best_bm25(hits, terms, stats, k)


def test_within_the_budget_the_candidates_are_bm25s_exact_top_k(
    store: tuple[CountedConnection, dict[str, list[str]]],
) -> None:
    conn, chunks = store
    questions = [["film", "rare3"], ["year", "band", "rare7", "rare9"], ["film", "year", "band"], ["nothing"]]
    stats, whole_index = bm25_stats(conn, MINE, sorted({t for ts in questions for t in ts}))
    assert not whole_index  # another collection has rows in the index
    assert all(sum(stats.df.get(t, 0) for t in ts) <= chunk_candidates.POSTINGS_BUDGET for ts in questions)
    for ts, got in zip(questions, _lexical(conn, questions, 30), strict=True):
        want = _exact(chunks, ts, stats, 30, set(ts))
        assert list(got) == list(want)  # the same chunks in the same order
        assert got == pytest.approx(want)


def test_over_the_budget_the_rare_terms_are_searched_and_every_term_scores(
    store: tuple[CountedConnection, dict[str, list[str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    conn, chunks = store
    monkeypatch.setattr(chunk_candidates, "POSTINGS_BUDGET", 40)
    question = ["film", "year", "rare1", "rare2", "rare5", "rare6", "rare8"]
    stats, _ = bm25_stats(conn, MINE, question)
    rare = set(searched_terms(question, stats))
    assert "film" not in rare and "year" not in rare and len(rare) >= 3
    holders = [i for i, words in chunks.items() if rare & set(words)]
    assert len(holders) >= 5
    matched: list[list[str]] = []
    monkeypatch.setattr(
        chunk_candidates, "fts_query", lambda t, ts, whole: matched.append(list(ts)) or fts_query(t, ts, whole)
    )
    before = conn.statements
    (got,) = _lexical(conn, [question], 5)
    assert conn.statements - before == 4  # statistics, one full-text statement, IVF check, vectors: no second search
    assert matched == [[t for t in question if t in rare]]  # the common terms were not matched
    assert got == pytest.approx(_exact(chunks, question, stats, 5, rare))
    assert set(got) <= set(holders)


def test_rare_terms_short_of_k_chunks_fall_back_to_the_others(
    store: tuple[CountedConnection, dict[str, list[str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    conn, chunks = store
    monkeypatch.setattr(chunk_candidates, "POSTINGS_BUDGET", 40)
    question = ["band", "rare4"]
    stats, _ = bm25_stats(conn, MINE, question)
    assert searched_terms(question, stats) == ["rare4"]
    (got,) = _lexical(conn, [question], 50)
    holders = {i for i, words in chunks.items() if {"band", "rare4"} & set(words)}
    assert len(got) == min(50, len(holders))
    assert {i for i, words in chunks.items() if "rare4" in words} <= set(got)  # the rare holders score best
    assert got == pytest.approx(_exact(chunks, question, stats, 50, {"band", "rare4"}))


def test_the_rarest_term_is_always_searched_and_a_small_collection_searches_all() -> None:
    stats = Bm25Stats(100, 1000, {"a": 90, "b": 60, "c": 3})
    assert searched_terms(["a", "b", "c"], stats) == ["a", "b", "c"]  # 153 chunks: within the budget
    big = Bm25Stats(10**6, 10**8, {"a": 900_000, "b": 600_000, "c": 30_000, "d": 1_000})
    assert searched_terms(["a", "b", "c", "d", "unknown"], big) == ["d", "unknown"]
    assert searched_terms(["a", "b"], big) == ["b"]


def test_another_collections_chunks_never_come_back(store: tuple[CountedConnection, dict[str, list[str]]]) -> None:
    conn, _ = store
    for got in _lexical(conn, [["film"], ["rare1", "band"], COMMON + RARE], 200):
        assert got and all(i.startswith("mine:") for i in got)


def test_a_collection_alone_in_the_index_matches_without_its_tenant_phrase(monkeypatch: pytest.MonkeyPatch) -> None:
    conn = sqlite3.connect(":memory:", factory=CountedConnection)
    conn.executescript(SCHEMA)
    mine = _chunks(3, 400)
    _write(conn, MINE, mine, 1)
    conn.commit()
    set_scope(conn, None)
    chunks = {f"mine:{n}": words for n, words in enumerate(mine)}
    questions = [["film", "rare3"], ["year", "band", "rare7", "rare9"], COMMON + RARE[:5], ["nothing"]]
    assert bm25_stats(conn, MINE, ["film"])[1]  # the collection holds the whole index
    matched: list[str | None] = []
    monkeypatch.setattr(
        chunk_candidates, "fts_query", lambda t, ts, whole: matched.append(fts_query(t, ts, whole)) or matched[-1]
    )
    alone = _lexical(conn, questions, 20)
    assert matched and all(q is not None and "tenant" not in q for q in matched)
    matched.clear()
    monkeypatch.setattr(chunk_candidates, "fts_query", lambda t, ts, _: matched.append(fts_query(t, ts)) or matched[-1])
    assert _lexical(conn, questions, 20) == alone  # with the tenant phrase: the same chunks, order and scores
    assert all(q is not None and q.startswith("tenant : ") for q in matched)
    stats, _ = bm25_stats(conn, MINE, sorted({t for ts in questions for t in ts}))
    for ts, got in zip(questions[:2], alone[:2], strict=True):
        assert list(got) == list(_exact(chunks, ts, stats, 20, set(searched_terms(ts, stats))))
    _write(conn, OTHER, _chunks(4, 10), 1001)  # a second collection: the phrase is back
    assert not bm25_stats(conn, MINE, ["film"])[1]
