"""graph.db's dictionary-encoded triples (issue 38): reads keep the key order of values however the
ids were assigned; a file written in the text layout (or an older one) is copied into the encoded
tables on open and reads back the same, and a kill during the copy leaves a file the next open
copies."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from functools import partial
from pathlib import Path

from processors.stores.sqlite.triples import SqliteTripleStore
from schemas.tenant import Tenant
from schemas.terms import RDFS_LABEL, Term, Triple
from schemas.triples import NeighboursQuery

ALICE, BOB = Tenant("alice", "kb"), Tenant("bob", "kb")
E, R = "http://example.org/e/", "http://example.org/r/"
GRAPH = [
    # written out of value order: zed, then mia, then ada
    Triple(s=Term.iri(E + "zed"), p=Term.iri(R + "knows"), o=Term.iri(E + "ada")),
    Triple(s=Term.iri(E + "ada"), p=Term.iri(R + "knows"), o=Term.iri(E + "zed")),
    Triple(s=Term.iri(E + "ada"), p=Term.iri(R + "knows"), o=Term.iri(E + "mia")),
    Triple(s=Term.iri(E + "ada"), p=Term.iri(R + "age"), o=Term.literal("36", "http://www.w3.org/2001/XMLSchema#int")),
    Triple(s=Term.iri(E + "ada"), p=Term.iri(R + "motto"), o=Term.literal("ja\x00nein", language="de")),
    Triple(s=Term.iri(E + "ada"), p=Term.iri(R + "motto"), o=Term.literal("ja\x00nein")),  # a NUL, kept whole
    Triple(s=Term.iri(E + "mia"), p=Term.iri(R + "admires"), o=Term.iri(E + "ada")),
    Triple(s=Term.iri(E + "ada"), p=Term.iri(RDFS_LABEL), o=Term.literal("Ada", language="en")),
    Triple(s=Term.iri(E + "mia"), p=Term.iri(RDFS_LABEL), o=Term.literal("Mia")),
]
NAMES = ("ada", "mia", "zed", "nobody")

# What graph.db held before the encoding: every row spelt out (the same load_state and graph_version).
TEXT_LAYOUT = """
CREATE TABLE load_state (user TEXT NOT NULL, collection TEXT NOT NULL, started REAL NOT NULL, finished REAL,
    source TEXT NOT NULL DEFAULT '', triples INTEGER NOT NULL DEFAULT 0, vectors INTEGER NOT NULL DEFAULT 0,
    error TEXT, PRIMARY KEY (user, collection)) WITHOUT ROWID;
CREATE TABLE triples (user TEXT NOT NULL, collection TEXT NOT NULL, s TEXT NOT NULL, p TEXT NOT NULL,
    o TEXT NOT NULL, o_lit INTEGER NOT NULL DEFAULT 0, o_dt TEXT NOT NULL DEFAULT '', o_lang TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (user, collection, s, p, o, o_lit, o_dt, o_lang)) WITHOUT ROWID;
CREATE INDEX pos ON triples(user, collection, p, o);
CREATE INDEX ops ON triples(user, collection, o, o_lit, p, s);
CREATE TABLE labels (user TEXT NOT NULL, collection TEXT NOT NULL, iri TEXT NOT NULL, label TEXT NOT NULL,
    PRIMARY KEY (user, collection, iri)) WITHOUT ROWID;
"""  # fmt: skip


def write_text_layout(path: Path, schema: str = TEXT_LAYOUT) -> None:
    """GRAPH for alice and bob as the text layout stored it, and alice's load recorded."""
    conn = sqlite3.connect(path)
    conn.executescript(schema)
    for tenant in (ALICE, BOB):
        for t in GRAPH:
            o = (t.o.value, 0 if t.o.is_iri else 1, t.o.datatype or "", t.o.language or "")
            conn.execute(
                "INSERT INTO triples VALUES (?,?,?,?,?,?,?,?)",
                (tenant.user, tenant.collection, t.s.value, t.p.value, *o),
            )
            if t.p.value == RDFS_LABEL:
                conn.execute(
                    "INSERT OR REPLACE INTO labels VALUES (?,?,?,?)",
                    (tenant.user, tenant.collection, t.s.value, t.o.value),
                )
    if "load_state" in schema:
        conn.execute("INSERT INTO load_state VALUES ('alice', 'kb', 1, 2, 'corpus', 9, 0, NULL)")
    conn.commit()
    conn.close()


async def every_read(store: SqliteTripleStore, tenant: Tenant = ALICE) -> list[object]:
    """Every read of the store over the graph's entities, in the order each returns them."""
    out: list[object] = []
    for name in NAMES:
        e = Term.iri(E + name)
        out += [await store.pattern(tenant, e, None, None, 100), await store.pattern(tenant, None, None, e, 100)]
        for limit in (1, 2, 30):
            q = NeighboursQuery(
                user=tenant.user, collection=tenant.collection, entities=[E + name], limit_per_entity=limit
            )
            out.append((await store.neighbours(q)).triples)
            out.append(await store.adjacent(tenant, [E + name], limit))
    out.append(sorted(await store.pattern(tenant, None, Term.iri(R + "knows"), None, 100), key=str))
    out.append(sorted(await store.pattern(tenant, None, None, None, 100), key=str))
    out += [await store.labels(tenant, [E + n for n in NAMES]), await store.collections(tenant.user)]
    return out


def columns(path: Path, table: str) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {r[1] for r in conn.execute("SELECT * FROM pragma_table_info(?)", (table,))}
    finally:
        conn.close()


async def reference_reads(tmp_path: Path) -> list[object]:
    """The reads of GRAPH written through the store (the encoded layout from the start)."""
    store = SqliteTripleStore(tmp_path / "written.db")
    try:
        for tenant in (ALICE, BOB):
            await store.add_triples(tenant, GRAPH)
        return await every_read(store)
    finally:
        await store.close()


async def test_reads_keep_the_key_order_of_values_not_of_ids(tmp_path: Path) -> None:
    store = SqliteTripleStore(tmp_path / "graph.db")
    try:
        await store.add_triples(ALICE, GRAPH)
        ada = Term.iri(E + "ada")
        got = await store.pattern(ALICE, ada, None, None, 100)
        assert [(t.p.value, t.o.value, t.o.language) for t in got] == [
            (R + "age", "36", None),
            (R + "knows", E + "mia", None),
            (R + "knows", E + "zed", None),
            (R + "motto", "ja\x00nein", None),
            (R + "motto", "ja\x00nein", "de"),
            (RDFS_LABEL, "Ada", "en"),
        ]
        q = NeighboursQuery(user="alice", collection="kb", entities=[E + "ada"], limit_per_entity=2)
        first = [(t.s.value, t.p.value, t.o.value) for t in (await store.neighbours(q)).triples]
        assert first == [  # out: age, then knows mia (not zed, written first); in: mia admires, zed knows
            (E + "ada", R + "age", "36"),
            (E + "ada", R + "knows", E + "mia"),
            (E + "mia", R + "admires", E + "ada"),
            (E + "zed", R + "knows", E + "ada"),
        ]
        assert await store.labels(ALICE, [E + "mia", E + "ada", E + "nobody"]) == {E + "ada": "Ada", E + "mia": "Mia"}
        assert await store.pattern(BOB, ada, None, None, 100) == []  # the terms are shared, the triples not
        assert await store.labels(BOB, [E + "ada"]) == {}
    finally:
        await store.close()


async def test_a_text_layout_graph_db_reads_back_the_same_after_its_copy(tmp_path: Path) -> None:
    path = tmp_path / "graph.db"
    write_text_layout(path)
    store = SqliteTripleStore(path)
    try:
        assert await every_read(store) == await reference_reads(tmp_path)
        state = await store.load_state(ALICE)
        assert state is not None and state.source == "corpus" and state.triples == 9
        assert await store.add_triples(ALICE, GRAPH[:1]) == 0  # already there
        await store.delete_collection(BOB)
        assert await store.collections("bob") == {}
        assert await store.collections("alice") == {"kb": len(GRAPH)}
    finally:
        await store.close()
    assert "scope" in columns(path, "triples") and "scope" in columns(path, "labels")
    conn = sqlite3.connect(path)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    indexes = {
        r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'triples' AND type = 'index'")
    }
    conn.close()
    assert not {"triples_text", "labels_text", "triples_rowid"} & tables
    assert indexes == {"pos", "ops"}  # spo is the table itself


async def test_an_older_rowid_graph_db_without_load_records_is_copied_too(tmp_path: Path) -> None:
    path = tmp_path / "graph.db"
    older = TEXT_LAYOUT.split("CREATE TABLE triples")[1].replace(
        ") WITHOUT ROWID;\nCREATE INDEX pos", ");\nCREATE INDEX pos"
    )
    write_text_layout(path, "CREATE TABLE triples" + older)
    store = SqliteTripleStore(path)
    try:
        assert await every_read(store) == await reference_reads(tmp_path)
        state = await store.load_state(BOB)
        assert state is not None and state.source == "an earlier kgflow"
    finally:
        await store.close()


async def test_an_older_copy_a_kill_interrupted_is_finished_too(tmp_path: Path) -> None:
    path = tmp_path / "graph.db"
    write_text_layout(path)  # then an older version's rowid copy, renamed, killed before it was copied
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE triples_rowid AS SELECT * FROM triples WHERE s = ?", (E + "ada",))
    conn.execute("DELETE FROM triples WHERE s = ?", (E + "ada",))
    conn.commit()
    conn.close()
    store = SqliteTripleStore(path)
    try:
        assert await every_read(store) == await reference_reads(tmp_path)
    finally:
        await store.close()
    assert "user" not in columns(path, "triples") and columns(path, "triples_rowid") == set()


KILLED_MID_COPY = """
import os, signal, sys
from pathlib import Path
from processors.stores.sqlite import triple_ids
from processors.stores.sqlite.triples import SqliteTripleStore

copy = triple_ids._copy
def copy_then_die(conn, table):
    copy(conn, table)  # the triples copied, their text table not yet dropped, nothing committed
    os.kill(os.getpid(), signal.SIGKILL)
triple_ids._copy = copy_then_die
SqliteTripleStore(Path(sys.argv[1]))
"""


async def test_a_kill_during_the_copy_leaves_a_file_the_next_open_copies(tmp_path: Path) -> None:
    path = tmp_path / "graph.db"
    write_text_layout(path)
    argv = [sys.executable, "-c", KILLED_MID_COPY, str(path)]
    run = partial(subprocess.run, argv, capture_output=True, check=False, cwd=Path(__file__).parents[2])
    died = await asyncio.to_thread(run)
    assert died.returncode == -9, died.stderr.decode()[-2000:]
    assert "user" in columns(path, "triples")  # the text layout, whole
    store = SqliteTripleStore(path)
    try:
        assert await every_read(store) == await reference_reads(tmp_path)
    finally:
        await store.close()
    assert "scope" in columns(path, "triples")
