"""A large space's resident copy (faiss product-quantizer codes of its IVF lists) answers as the rows
do: the same nearest items and scores (its candidates scored by their int8 codes), with no list
read once it is made; a write, in this process or another,
is seen at the next search; it is saved beside the file and loaded by the next process; spaces it
cannot key, scoped searches and other collections go through the rows."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import numpy as np

from processors.stores.sqlite.pool import CountedConnection
from processors.stores.sqlite.resident_lists import ResidentLists, key_item, main_file
from processors.stores.sqlite.vector_lists import SCHEMA, VectorLists
from schemas.tenant import Tenant

T = Tenant("u", "c")
DIMS = 32


def _unit(m: np.ndarray) -> np.ndarray:
    return (m / np.linalg.norm(m, axis=-1, keepdims=True)).astype(np.float32)


def _ids(n: int, prefix: str = "c") -> list[str]:
    return [f"{prefix}{k * 7919 + 3:016x}" for k in range(n)]


def _index(tmp_path: Path, tenant: Tenant, ids: list[str], seed: int = 0) -> tuple[CountedConnection, np.ndarray]:
    conn = sqlite3.connect(tmp_path / "v.db", factory=CountedConnection, check_same_thread=False)
    conn.executescript(SCHEMA)
    # groups of five near copies: each item's nearest four are its group's (cosine ~.98 against ~.3)
    rng = np.random.default_rng(seed)
    bases = rng.normal(size=((len(ids) + 4) // 5, DIMS))
    vecs = _unit(np.repeat(bases, 5, axis=0)[: len(ids)] + 0.1 * rng.normal(size=(len(ids), DIMS)))
    with conn:
        VectorLists().add(
            conn, tenant, "chunk", [(i, f"d{k % 5}", v) for k, (i, v) in enumerate(zip(ids, vecs, strict=True))]
        )
    return conn, vecs


def _resident() -> VectorLists:
    return VectorLists(ResidentLists(resident_at=1000, background=False))


def _rows_only() -> VectorLists:
    return VectorLists(ResidentLists(resident_at=10**12))


def test_a_large_space_is_searched_in_its_copy_as_the_rows_answer(tmp_path: Path) -> None:
    ids = _ids(6000)
    conn, vecs = _index(tmp_path, T, ids)
    vl, rows = _resident(), _rows_only()
    qs = [vecs[5], vecs[4000], _unit(vecs[11] + vecs[23])]
    vl.search_many(conn, T, "chunk", qs, 10, probe=1500)  # makes the copy
    assert vl.resident._spaces[("u", "c", "chunk")] is not None
    before = conn.statements
    found = vl.search_many(conn, T, "chunk", qs, 10, probe=1500)
    assert conn.statements - before == 2  # the version check, the candidates' int8 codes: no list is read
    assert {i for i, _ in found[0][:5]} == set(ids[5:10]) and {i for i, _ in found[1][:5]} == set(ids[4000:4005])
    # the copy's best 40 scored by their int8 codes: the rows' best five, scores and all (to rounding);
    # past them, near-equal neighbours (~.5) that 8 PQ bytes of 32 dims cannot all tell apart
    wanted = rows.search_many(conn, T, "chunk", qs, 10, probe=1500)
    for hits, want in zip(found[:2], wanted[:2], strict=True):
        assert [i for i, _ in hits[:5]] == [i for i, _ in want[:5]]
        np.testing.assert_allclose([s for _, s in hits[:5]], [s for _, s in want[:5]], atol=1e-5)
    for hits, want in zip(found, wanted, strict=True):
        assert len({i for i, _ in hits} & {i for i, _ in want}) >= 5
        assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)


def test_a_write_is_seen_at_the_next_search_and_the_saved_copy_serves_another_process(tmp_path: Path) -> None:
    ids = _ids(6000)
    conn, vecs = _index(tmp_path, T, ids)
    vl = VectorLists(ResidentLists(resident_at=1000))  # made in a thread: searches go on through the rows
    assert vl.search(conn, T, "chunk", vecs[0], 10, probe=1500)
    for _ in range(600):
        if vl.resident._spaces.get(("u", "c", "chunk")) is not None:
            break
        time.sleep(0.05)
    saved = list(tmp_path.glob("v.db.resident-*.faiss"))
    assert len(saved) == 1 and main_file(conn) == tmp_path / "v.db"
    other = _resident()  # another process: loads the saved copy
    assert {i for i, _ in other.search(conn, T, "chunk", vecs[77], 5, probe=1500)} == set(ids[75:80])
    new = vecs[77]
    with conn:
        vl.add(conn, T, "chunk", [(key_item(12345), "d9", new)])
        vl.remove(conn, T, "chunk", [ids[77]])
    for searcher in (vl, other):
        hits = [i for i, _ in searcher.search(conn, T, "chunk", vecs[77], 10, probe=1500)]
        assert set(hits[:5]) == {key_item(12345), *ids[75:77], *ids[78:80]} and ids[77] not in hits
    with conn:
        vl.drop(conn, T)  # the collection deleted: its copy and file go
    assert not list(tmp_path.glob("v.db.resident-*")) and ("u", "c", "chunk") not in vl.resident._spaces


def test_spaces_it_cannot_key_scopes_and_other_collections_go_through_the_rows(tmp_path: Path) -> None:
    other_ids = _ids(2000, "i")  # not chunk ids: no copy
    conn, vecs = _index(tmp_path, T, _ids(3000))
    b = Tenant("u", "other")
    with conn:
        VectorLists().add(conn, b, "chunk", [(i, "d0", v) for i, v in zip(other_ids, vecs[:2000], strict=True)])
    vl, rows = _resident(), _rows_only()
    assert vl.search(conn, b, "chunk", vecs[9], 5, probe=500) == rows.search(conn, b, "chunk", vecs[9], 5, probe=500)
    assert vl.resident._spaces[("u", "other", "chunk")] is None
    mine = [i for i, _ in vl.search(conn, T, "chunk", vecs[9], 20, probe=500)]
    assert set(mine[:5]) == set(_ids(3000)[5:10]) and not set(mine) & set(other_ids)
    scoped = vl.search(conn, T, "chunk", vecs[9], 20, allowed={"d1"}, probe=500)
    assert scoped == rows.search(conn, T, "chunk", vecs[9], 20, allowed={"d1"}, probe=500)
