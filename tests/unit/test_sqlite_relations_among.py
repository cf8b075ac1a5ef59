"""The SQLite store's relations among entities (relation_rows.AMONG), read pair by pair, against
an oracle grouping every source row: the same relations, supports and order, with several
predicates between the same ends, self-loops, hubs whose sources mostly lead elsewhere, a scope
of documents, a limit, and another collection's rows in the same tables."""

from __future__ import annotations

import json
import random
import sqlite3
from collections import Counter

import pytest

from processors.stores.sqlite.docs_schema import SCHEMA
from processors.stores.sqlite.relation_rows import AMONG, iri_ids
from schemas.tenant import Tenant

MINE, OTHER = Tenant("u", "mine"), Tenant("u", "other")
ENTITIES = [f"http://e/{n}" for n in range(30)]
PREDICATES = ["http://r/related_to", "http://r/born_in", "http://r/a"]
DOCS = [f"d{n}" for n in range(20)]


def _rows(conn: sqlite3.Connection, tenant: Tenant, seed: int) -> list[tuple[str, str, str, str]]:
    """Random sources (s, p, o, document) of `tenant`, written with a chunk per source document."""
    rng = random.Random(seed)
    ids = iri_ids(conn, tenant, ENTITIES + PREDICATES)
    chunk = {}
    for d in DOCS:
        cur = conn.execute(
            "INSERT INTO chunks (user, collection, id, document_id, ordinal, text, start, end, tokens, vec)"
            " VALUES (?, ?, ?, ?, 0, '', 0, 0, 0, x'')",
            (tenant.user, tenant.collection, f"{tenant.collection}:{d}", d),
        )
        chunk[d] = cur.lastrowid
    out = set()
    for _ in range(900):
        hub = rng.random() < 0.5  # entity 0 is an end of half the sources
        s = ENTITIES[0] if hub else rng.choice(ENTITIES)
        out.add((s, rng.choice(PREDICATES), rng.choice(ENTITIES), rng.choice(DOCS)))
    conn.executemany(
        "INSERT INTO rel_sources VALUES (?, ?, ?, ?)", [(ids[s], ids[p], ids[o], chunk[d]) for s, p, o, d in out]
    )
    return sorted(out)


@pytest.fixture
def store() -> tuple[sqlite3.Connection, list[tuple[str, str, str, str]]]:
    conn = sqlite3.connect(":memory:")
    conn.executescript(SCHEMA)
    mine = _rows(conn, MINE, 1)
    _rows(conn, OTHER, 2)
    conn.commit()
    return conn, mine


def _oracle(
    sources: list[tuple[str, str, str, str]], entities: list[str], docs: list[str] | None, limit: int
) -> list[tuple[str, str, str, int]]:
    among = set(entities)
    support = Counter((s, p, o) for s, p, o, d in sources if s in among and o in among and (docs is None or d in docs))
    ranked = sorted(support.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][2], kv[0][1]))
    return [(s, p, o, n) for (s, p, o), n in ranked[:limit]]


@pytest.mark.parametrize("docs", [None, ["d1", "d3", "d5", "d7"]])
@pytest.mark.parametrize("limit", [5, 1000])
def test_relations_among_entities_are_every_sources_groups(
    store: tuple[sqlite3.Connection, list[tuple[str, str, str, str]]], docs: list[str] | None, limit: int
) -> None:
    conn, sources = store
    rng = random.Random(limit)
    for entities in (ENTITIES[:12], rng.sample(ENTITIES, 8), [ENTITIES[0], "http://e/unknown", ENTITIES[5]]):
        args = (MINE.user, MINE.collection, json.dumps(entities), None if docs is None else json.dumps(docs), limit)
        got = [tuple(r) for r in conn.execute(AMONG, args)]
        want = _oracle(sources, entities, docs, limit)
        assert got == want
        assert len({p for _, p, _, _ in got}) > 1 or limit < 10 or len(entities) < 4  # several predicates met
