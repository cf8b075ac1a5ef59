"""Relation search from the entity vectors (processors/query/documents/relations.py) on the real
document stores and entity indexes (SQLite + the local index; Neo4j): a relation keeps no vector,
it is scored by cos(question, v_s + v_o + c): its ends' stored vectors and the mean vector of its
source chunks in scope, within the scope."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from processors.query.documents.relations import search_relations
from processors.stores.protocol import EntityIndex
from schemas.documents import Scope
from schemas.tenant import Tenant
from tests.integration.doc_store_fixtures import REL, DocBackend, e, record
from tests.integration.store_fixtures import INT8_COSINE_TOL, near, unit

VECTORS = {"curie": unit(1), "paris": unit(2), "warsaw": unit(3), "seine": unit(4)}  # louvre: none


@pytest.fixture
async def index(docs: DocBackend, tmp_path: Path) -> AsyncIterator[EntityIndex]:
    """The entity index beside the document store of the same backend."""
    if docs.conn is None:
        from processors.stores.local.entity_index import LocalEntityIndex

        idx: EntityIndex = LocalEntityIndex(tmp_path / "vectors.db")
    else:
        from processors.stores.neo4j.store import Neo4jEntityIndex

        idx = Neo4jEntityIndex(docs.conn)
    yield idx
    for user, collection in docs.scopes:
        await idx.delete_collection(Tenant(user, collection))


def expected(q: list[float], relations: list[tuple[str, str, list[int]]]) -> list[tuple[tuple[str, str, str], float]]:
    """(relation, cos(q, its ends' vectors + the mean of its chunks' vectors)) best first, as the
    search must score them (a chunk n of the records below has the vector unit(1000 + n))."""
    qn = np.asarray(q) / np.linalg.norm(q)
    out = []
    for s, o, chunks in relations:
        context = np.mean([unit(1000 + n) for n in chunks], axis=0)
        v = np.sum([VECTORS[x] for x in (s, o) if x in VECTORS], axis=0) + context
        out.append(((e(s), REL, e(o)), float(v @ qn / np.linalg.norm(v))))
    return sorted(out, key=lambda x: -x[1])


async def test_relations_are_scored_by_their_ends_vectors_in_scope(docs: DocBackend, index: EntityIndex) -> None:
    user, coll = docs.scope()
    tenant = Tenant(user, coll)
    await index.upsert(tenant, [(e(x), x, v) for x, v in VECTORS.items()], "entity", model="test")
    # a relation's ends are mentioned where it was found (a scope's seeds are what its chunks mention)
    a = record("a", ["x", "y"], mentions=[(0, "curie", 1), (0, "paris", 1), (1, "paris", 1), (1, "warsaw", 1)],
               relations=[("curie", "paris", [0, 1]), ("paris", "warsaw", [1])])  # fmt: skip
    b = record("b", ["z"], mentions=[(0, x, 1) for x in ("curie", "paris", "seine", "louvre")],
               relations=[("curie", "paris", [0]), ("curie", "seine", [0]), ("louvre", "seine", [0])])  # fmt: skip
    await docs.documents.store(tenant, [a, b])
    q = near(list(np.asarray(unit(1)) + np.asarray(unit(2))), 5, 0.3)

    got = await search_relations(index, docs.documents, tenant, q, 10)
    everywhere = [("curie", "paris", [0, 1, 0]), ("paris", "warsaw", [1]), ("curie", "seine", [0])]
    want = expected(q, [*everywhere, ("louvre", "seine", [0])])
    assert [(h.s, h.p, h.o) for h in got] == [k for k, _ in want]  # louvre has no vector: seine's and b:0's
    assert [h.score for h in got] == pytest.approx(
        [s for _, s in want], abs=INT8_COSINE_TOL if docs.conn is None else 1e-4
    )
    assert got[0].support == 3  # curie-paris: every source chunk
    best = await search_relations(index, docs.documents, tenant, q, 1)
    assert [(h.s, h.o) for h in best] == [(e("curie"), e("paris"))]

    in_b = await search_relations(index, docs.documents, Tenant(user, coll, Scope(document_ids=["b"])), q, 10)
    want_b = expected(q, [("curie", "paris", [0]), ("curie", "seine", [0]), ("louvre", "seine", [0])])
    assert [(h.s, h.p, h.o, h.support) for h in in_b] == [(*k, 1) for k, _ in want_b]
    nowhere = Tenant(user, coll, Scope(document_ids=["none"]))
    assert await search_relations(index, docs.documents, nowhere, q, 10) == []
    assert await search_relations(index, docs.documents, Tenant(user, docs.scope()[1]), q, 10) == []


async def test_an_older_docs_db_drops_its_relation_vectors_on_open(tmp_path: Path) -> None:
    from processors.stores.sqlite.documents import SqliteDocumentStore

    path = tmp_path / "docs.db"
    await SqliteDocumentStore(path).close()
    conn = sqlite3.connect(path)  # what a docs.db written before held
    conn.execute("CREATE TABLE relation_vectors (user, collection, s, p, o, vec)")
    for space in ("relation", "chunk"):
        conn.execute("INSERT INTO vector_spaces VALUES ('u', 'c', ?, 1, 1, 1)", (space,))
        conn.execute(
            "INSERT INTO vector_lists (user, collection, space, list, centroid, size) VALUES ('u', 'c', ?, 0, NULL, 1)",
            (space,),
        )
        conn.execute("INSERT INTO vector_items VALUES ('u', 'c', ?, 0, 'x', '', 1.0, x'00')", (space,))
    conn.commit()
    conn.close()
    await SqliteDocumentStore(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'relation_vectors'").fetchone() is None
    for table in ("vector_spaces", "vector_lists", "vector_items"):
        assert conn.execute("SELECT space FROM " + table).fetchall() == [("chunk",)], table
    conn.close()


# The Neo4j twin (an older database's relation vectors and spelt-out keys go, once): the relation
# model migration's test (test_neo4j_relation_migration.py) starts from such a database.
