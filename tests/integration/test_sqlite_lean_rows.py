"""The embedded stores' compact relation rows (issue 38): a docs.db written before
is moved into them on open with every read unchanged, each IRI is kept once per tenant, and what
a delete leaves unlinked takes its ids with it. The reads themselves: the store contracts."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import numpy as np

from processors.stores.documents_protocol import ChunkQuery
from processors.stores.sqlite.communities import SqliteCommunityStore
from processors.stores.sqlite.docs_schema import LINKS_READ, vec_bytes, vec_of
from processors.stores.sqlite.documents import SqliteDocumentStore
from schemas.documents import Scope
from schemas.tenant import Tenant
from tests.integration.doc_store_fixtures import REL, e, record

TENANT = Tenant("u", "c")
RECORDS = [
    record("a", ["x", "y"], mentions=[(0, "curie", 1), (1, "paris", 1), (1, "warsaw", 1)],
           relations=[("curie", "paris", [0, 1]), ("paris", "warsaw", [1])]),
    record("b", ["z"], mentions=[(0, "curie", 1), (0, "seine", 1)],
           relations=[("curie", "paris", [0]), ("curie", "seine", [0])]),
]  # fmt: skip
# What docs.db held before: a text row per relation and source chunk.
OLD_RELATION_SOURCES = """
CREATE TABLE relation_sources (
    user TEXT NOT NULL, collection TEXT NOT NULL, s TEXT NOT NULL, p TEXT NOT NULL, o TEXT NOT NULL,
    chunk_id TEXT NOT NULL, document_id TEXT NOT NULL,
    PRIMARY KEY (user, collection, s, p, o, chunk_id)
) WITHOUT ROWID;
INSERT INTO relation_sources SELECT si.user, si.collection, si.iri, pi.iri, oi.iri, c.id, c.document_id
  FROM rel_sources r JOIN iri_ids si ON si.id = r.s JOIN iri_ids pi ON pi.id = r.p JOIN iri_ids oi ON oi.id = r.o
  JOIN chunks c ON c.rowid = r.chunk;
DROP TABLE rel_sources;
DROP TABLE iri_ids;
"""


async def reads(store: SqliteDocumentStore) -> tuple[object, ...]:
    """Every relation read, over the collection and a scope."""
    ents = [e(x) for x in ("curie", "paris", "warsaw", "seine")]
    rels = sorted({(h.s, h.p, h.o) for h in await store.relations_of(TENANT, ents, 10)})
    scoped = Tenant("u", "c", Scope(document_ids=["b"]))
    return (
        sorted((h.s, h.p, h.o, h.support) for h in await store.relations_of(TENANT, ents, 10)),
        await store.relations(TENANT, ents, 10),
        await store.relations(scoped, ents, 10),
        await store.relation_chunks(ChunkQuery(TENANT), rels, 5),
        await store.scoped_neighbours(scoped, ents, 5),
        (await SqliteCommunityStore(store.db, store.lists).graph(TENANT)).edges,
    )


async def test_an_older_docs_db_moves_its_relation_sources_into_integers(tmp_path: Path) -> None:
    path = tmp_path / "docs.db"
    store = SqliteDocumentStore(path)
    await store.store(TENANT, RECORDS)
    before = await reads(store)
    await store.close()
    conn = sqlite3.connect(path)
    conn.executescript(OLD_RELATION_SOURCES)
    assert conn.execute("SELECT count(*) FROM relation_sources").fetchone() == (5,)
    conn.close()

    store = SqliteDocumentStore(path)
    try:
        assert await reads(store) == before
        assert before[0] == [
            (e("curie"), REL, e("paris"), 3), (e("curie"), REL, e("seine"), 1), (e("paris"), REL, e("warsaw"), 1)
        ]  # fmt: skip
    finally:
        await store.close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'relation_sources'").fetchone() is None
    assert conn.execute("SELECT count(*) FROM rel_sources").fetchone() == (5,)
    conn.close()


# What docs.db held before: a text row per mention, with a covering index by chunk.
OLD_MENTIONS = """
CREATE TABLE old_mentions AS SELECT * FROM mentions;
DROP VIEW mentions;
CREATE TABLE mentions (
    user TEXT NOT NULL, collection TEXT NOT NULL, entity TEXT NOT NULL, chunk_id TEXT NOT NULL,
    document_id TEXT NOT NULL, count INTEGER NOT NULL,
    PRIMARY KEY (user, collection, entity, chunk_id)
) WITHOUT ROWID;
INSERT INTO mentions SELECT * FROM old_mentions;
DROP TABLE old_mentions;
CREATE INDEX mentions_by_chunk ON mentions(user, collection, chunk_id, entity, document_id, count);
DROP TABLE chunk_mentions;
DELETE FROM iri_ids WHERE iri NOT IN (SELECT s FROM rel_sources JOIN iri_ids ON id = s);
"""


async def mention_reads(store: SqliteDocumentStore) -> tuple[object, ...]:
    """Every mention read, over the collection and a scope."""
    ents = [e(x) for x in ("curie", "paris", "warsaw", "seine")]
    chunks = ["a:0", "a:1", "b:0"]
    scoped = Tenant("u", "c", Scope(document_ids=["b"]))
    g = await SqliteCommunityStore(store.db, store.lists).graph(TENANT)
    return (
        sorted(await store.links(ChunkQuery(TENANT), ents, chunks, 5), key=str),
        sorted(await store.links(ChunkQuery(scoped), ents, chunks, 5), key=str),
        sorted(await store.scoped_entities(scoped)),
        (await store.episodes(ChunkQuery(TENANT), ents, chunks, None)).mentioned,
        sorted(
            zip(
                [g.names[i] for i in g.mentions.entity],
                [g.chunks[i] for i in g.mentions.chunk],
                g.mentions.count.tolist(),
                strict=True,
            )
        ),
    )


async def test_an_older_docs_db_moves_its_mentions_into_integers(tmp_path: Path) -> None:
    path = tmp_path / "docs.db"
    store = SqliteDocumentStore(path)
    await store.store(TENANT, RECORDS)
    await store.store(Tenant("u", "other"), RECORDS[1:])
    before = await mention_reads(store)
    await store.close()
    conn = sqlite3.connect(path)
    conn.executescript(OLD_MENTIONS)
    assert conn.execute("SELECT count(*) FROM mentions").fetchone() == (7,)
    conn.close()

    store = SqliteDocumentStore(path)
    try:
        assert await mention_reads(store) == before
        assert len(before[0]) == 5 and len(before[1]) == 2  # of 7 rows: the other collection's 2 unseen; the scope: b's
        assert before[2] == [e("curie"), e("seine")]
    finally:
        await store.close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT type FROM sqlite_master WHERE name = 'mentions'").fetchone() == ("view",)
    assert conn.execute("SELECT count(*) FROM chunk_mentions").fetchone() == (7,)
    conn.close()


async def test_each_iri_is_kept_once_and_leaves_with_its_last_source(tmp_path: Path) -> None:
    store = SqliteDocumentStore(tmp_path / "docs.db")
    try:
        await store.store(TENANT, RECORDS)
        await store.store(Tenant("u", "other"), RECORDS[:1])

        def ids(conn: sqlite3.Connection) -> list[tuple[str, str, str]]:
            return conn.execute("SELECT user, collection, iri FROM iri_ids ORDER BY 1, 2, 3").fetchall()

        names = [e(x) for x in ("curie", "paris", "seine", "warsaw")]
        assert await store.db.read(ids) == [
            *(("u", "c", i) for i in sorted([*names, REL])),
            *(("u", "other", i) for i in sorted([*names[:2], names[3], REL])),
        ]
        removed = await store.delete_documents(TENANT, ["b"])
        assert removed.relations == [(e("curie"), REL, e("seine"))]
        assert ("u", "c", e("seine")) not in await store.db.read(ids)  # no chunk mentions it now
        await store.delete_collection(TENANT)
        assert [r[1] for r in await store.db.read(ids)] == ["other"] * 4
        assert await store.db.read(lambda c: c.execute("SELECT count(*) FROM rel_sources").fetchone()) == (3,)
    finally:
        await store.close()


def test_a_chunk_vector_reads_back_from_float16_and_from_an_older_float32_blob() -> None:
    rng = np.random.default_rng(38)
    for dims in (384, 768):  # a float16 768 is as long as a float32 384, but for its mark
        v = rng.standard_normal(dims).astype(np.float32)
        v /= np.linalg.norm(v)
        half = vec_bytes(v)
        assert len(half) == 2 * dims + 1
        assert np.allclose(vec_of(half), v, atol=1e-3) and vec_of(half).dtype == np.float32
        assert np.array_equal(vec_of(v.tobytes()), v)  # what an earlier kgflow wrote


# What docs.db held before: spellings keyed by text, a document's share in text rows.
OLD_SPELLINGS = """
CREATE TABLE new_doc AS SELECT s.user, s.collection, d.document_id, s.iri, s.label, d.n
  FROM doc_spellings d JOIN spellings s ON s.id = d.spelling;
CREATE TABLE new_sums AS SELECT user, collection, iri, label, n FROM spellings;
DROP TABLE doc_spellings;
DROP TABLE spellings;
CREATE TABLE doc_spellings (
    user TEXT NOT NULL, collection TEXT NOT NULL, document_id TEXT NOT NULL, iri TEXT NOT NULL,
    label TEXT NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (user, collection, document_id, iri, label)
) WITHOUT ROWID;
CREATE TABLE spellings (
    user TEXT NOT NULL, collection TEXT NOT NULL, iri TEXT NOT NULL, label TEXT NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (user, collection, iri, label)
) WITHOUT ROWID;
INSERT INTO doc_spellings SELECT * FROM new_doc;
INSERT INTO spellings SELECT * FROM new_sums;
DROP TABLE new_doc;
DROP TABLE new_sums;
"""


async def test_an_older_docs_db_moves_its_spellings_and_a_delete_still_takes_them_away(tmp_path: Path) -> None:
    path = tmp_path / "docs.db"
    spelt = [
        dataclasses.replace(RECORDS[0], spellings={e("curie"): {"Curie": 2, "M. Curie": 1}}),
        dataclasses.replace(RECORDS[1], spellings={e("curie"): {"Curie": 1}, e("seine"): {"Seine": 1}}),
    ]
    store = SqliteDocumentStore(path)
    for tenant in (TENANT, Tenant("u", "other")):
        await store.store(tenant, spelt)
    iris = [e("curie"), e("seine")]
    summed = {e("curie"): {"Curie": 3, "M. Curie": 1}, e("seine"): {"Seine": 1}}
    assert await store.spellings(TENANT, iris) == summed
    await store.close()
    conn = sqlite3.connect(path)
    conn.executescript(OLD_SPELLINGS)
    assert conn.execute("SELECT count(*) FROM doc_spellings").fetchone() == (8,)
    conn.close()

    store = SqliteDocumentStore(path)
    try:
        assert await store.spellings(TENANT, iris) == {
            e("curie"): {"Curie": 3, "M. Curie": 1},
            e("seine"): {"Seine": 1},
        }
        await store.delete_documents(TENANT, ["b"])
        assert await store.spellings(TENANT, iris) == {e("curie"): {"Curie": 2, "M. Curie": 1}}
        await store.delete_collection(Tenant("u", "other"))
        assert await store.spellings(Tenant("u", "other"), iris) == {}
        assert await store.spellings(TENANT, iris) == {e("curie"): {"Curie": 2, "M. Curie": 1}}
    finally:
        await store.close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM doc_spellings").fetchone() == (2,)  # a's two, of TENANT
    conn.close()


async def test_an_entity_s_first_mentions_are_a_sample_not_its_earliest_chunks(tmp_path: Path) -> None:
    store = SqliteDocumentStore(tmp_path / "docs.db")
    try:
        hub = [record(f"d{i:03d}", [f"text {i}"], mentions=[(0, "hub", 1)]) for i in range(600)]
        await store.store(TENANT, hub)
        read = await store.links(ChunkQuery(TENANT), [e("hub")], [], LINKS_READ)
        assert len({m.chunk_id for m in read}) == LINKS_READ < 600
        later = sum(int(m.chunk_id[1:4]) >= LINKS_READ for m in read)
        assert later > LINKS_READ // 4  # not the LINKS_READ written first (about 57% were written later)
        assert await store.db.read(lambda c: c.execute("SELECT count(*) FROM mentions").fetchone()) == (600,)
    finally:
        await store.close()


async def test_in_one_batch_the_first_document_to_mention_a_concept_decides_its_row(tmp_path: Path) -> None:
    # a, then b, mention curie: a does not own it, b does and gives another key; both keys and the
    # alias find it, each once, and the rows are those of a write of a alone, then b alone.
    keyed = [
        dataclasses.replace(RECORDS[0], keys={e("curie"): "curie"}, aliases={e("curie"): ("marie curie",)}),
        dataclasses.replace(RECORDS[1], owned={e("curie")}, keys={e("curie"): "m curie"},
                            aliases={e("curie"): ("marie curie",)}),
    ]  # fmt: skip
    rows = "SELECT iri, owned, key FROM concepts ORDER BY iri"
    keys_sql = "SELECT key, iri FROM concept_keys ORDER BY key, iri"
    found = []
    for batches in ([keyed], [keyed[:1], keyed[1:]]):
        store = SqliteDocumentStore(tmp_path / f"{len(batches)}.db")
        try:
            for batch in batches:
                await store.store(TENANT, batch)
            found.append(await store.db.read(lambda c: (c.execute(rows).fetchall(), c.execute(keys_sql).fetchall())))
            assert await store.claimed(TENANT, [e("curie")]) == set()  # a's row: not owned
            assert await store.concept_keys(TENANT, ["curie", "m curie", "marie curie"]) == {
                "curie": [e("curie")], "m curie": [e("curie")], "marie curie": [e("curie")],
            }  # fmt: skip
        finally:
            await store.close()
    assert found[0] == found[1]
    assert (e("curie"), 0, "curie") in found[0][0]
