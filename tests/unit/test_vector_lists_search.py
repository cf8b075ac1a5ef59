"""The IVF index's search reads few statements and finds what a list-by-list read finds: the lists
nearest the vector until `probe` items, scored by their int8 codes (a reference read list by list,
as the index searched before), for several vectors in one call; a small space's codes are kept
until its version changes, and so are the lists a large space's searches read."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from processors.stores.sqlite.list_codes import ListCache
from processors.stores.sqlite.pool import CountedConnection
from processors.stores.sqlite.vector_lists import _LIST_ITEMS, SCHEMA, VectorLists, migrate
from schemas.tenant import Tenant

T = Tenant("u", "c")


def _unit(m: np.ndarray) -> np.ndarray:
    return (m / np.linalg.norm(m, axis=-1, keepdims=True)).astype(np.float32)


def indexed(tmp_path: Path, n: int, seed: int = 0) -> tuple[CountedConnection, VectorLists, np.ndarray]:
    conn = sqlite3.connect(tmp_path / "v.db", factory=CountedConnection)
    conn.executescript(SCHEMA)
    vecs = _unit(np.random.default_rng(seed).normal(size=(n, 16)))
    vl = VectorLists()
    with conn:
        vl.add(conn, T, "chunk", [(f"i{k:05}", f"d{k % 7}", v) for k, v in enumerate(vecs)])
    return conn, vl, vecs


def reference(conn: sqlite3.Connection, vl: VectorLists, q: np.ndarray, k: int, probe: int) -> list[str]:
    """The best `k` items read list by list, nearest list first, until `probe` items."""
    cents = vl._centroids(conn, T, "chunk", cached=False)
    order = np.argsort(-(cents.matrix @ q), kind="stable") if cents.matrix is not None else range(len(cents.lists))
    ids, sims, read = [], [], 0
    for n in order:
        for item, _, scale, code in conn.execute(_LIST_ITEMS, ("u", "c", "chunk", cents.lists[int(n)])):
            ids.append(item)
            sims.append(float(np.frombuffer(code, dtype=np.int8).astype(np.float32) @ q) * scale)
        read += cents.sizes[int(n)]
        if read >= probe:
            break
    return [ids[i] for i in np.argsort(-np.asarray(sims, dtype=np.float32), kind="stable")[:k]]


def test_a_trained_space_reads_the_nearest_lists_of_every_vector_in_one_statement(tmp_path: Path) -> None:
    conn, vl, vecs = indexed(tmp_path, 5000)
    assert len(vl._centroids(conn, T, "chunk").lists) > 4  # trained: several lists
    qs = [vecs[3], vecs[1200], _unit(vecs[7] + vecs[9])]
    before = conn.statements
    found = vl.search_many(conn, T, "chunk", qs, 10, probe=1500)
    assert conn.statements - before == 2  # the version check, then every list wanted at once
    for q, hits in zip(qs, found, strict=True):
        assert [i for i, _ in hits] == reference(conn, vl, q, 10, 1500)
    assert found[0][0][0] == "i00003"
    assert vl.search(conn, T, "chunk", qs[1], 10, probe=1500) == found[1]
    scoped = vl.search(conn, T, "chunk", qs[0], 10, allowed={"d1", "d2"}, probe=1500)
    assert scoped and all(int(i[1:]) % 7 in (1, 2) for i, _ in scoped)
    # a round's vectors share the lists they pick: each is scored as if asked alone, to the bit
    round_ = vl.search_many(conn, T, "chunk", [*qs, *qs[::-1]], 10, allowed={"d1", "d2"}, probe=1500)
    assert round_[0] == scoped == round_[-1]
    assert round_[1] == vl.search(conn, T, "chunk", qs[1], 10, allowed={"d1", "d2"}, probe=1500)


def test_a_small_space_is_scored_from_codes_kept_until_it_changes(tmp_path: Path) -> None:
    conn, vl, vecs = indexed(tmp_path, 300)
    q = vecs[5]
    first = vl.search(conn, T, "chunk", q, 5)
    assert [i for i, _ in first] == reference(conn, vl, q, 5, 8192) and first[0][0] == "i00005"
    before = conn.statements
    assert vl.search_many(conn, T, "chunk", [q, vecs[6]], 5)[0] == first
    assert conn.statements - before == 1  # the version check only: the codes are kept
    with conn:  # a write changes the version: the next search reads the space again and sees it
        vl.add(conn, T, "chunk", [("new", "d9", _unit(q + 0.001))])
    assert vl.search(conn, T, "chunk", q, 5)[0][0] in {"new", "i00005"}
    assert "new" in {i for i, _ in vl.search(conn, T, "chunk", q, 5)}


def test_a_large_space_keeps_the_lists_it_read_until_it_changes(tmp_path: Path) -> None:
    conn, vl, vecs = indexed(tmp_path, 5000)
    qs = [vecs[3], vecs[1200], _unit(vecs[7] + vecs[9])]
    first = vl.search_many(conn, T, "chunk", qs, 10, probe=1500)
    before = conn.statements
    again = vl.search_many(conn, T, "chunk", [qs[1], qs[0]], 10, probe=1500)
    assert conn.statements - before == 1  # the version check only: every list wanted is kept
    assert again == [first[1], first[0]]
    assert first == VectorLists().search_many(conn, T, "chunk", qs, 10, probe=1500)  # as read, to the bit
    kept = {lst: codes for (_, lst), (_, codes) in vl._lists._lists.items()}
    with conn:  # a write stamps the list it changes: that list is read again and shows it
        vl.add(conn, T, "chunk", [("near", "d9", _unit(qs[0] + 0.001))])
    (changed,) = {lst for (lst,) in conn.execute("SELECT list FROM vector_items WHERE item = 'near'")}
    before = conn.statements
    after = vl.search(conn, T, "chunk", qs[0], 10, probe=1500)
    assert conn.statements - before == 3  # the version check, the centroids (their stamps), the changed list
    assert "near" in {i for i, _ in after}
    assert after == VectorLists().search(conn, T, "chunk", qs[0], 10, probe=1500)
    now = {lst: codes for (_, lst), (_, codes) in vl._lists._lists.items()}
    assert now[changed] is not kept[changed] and "near" in now[changed].ids
    assert all(now[lst] is codes for lst, codes in kept.items() if lst != changed)  # the rest kept as read


def test_a_small_space_reads_again_only_the_lists_a_write_changed(tmp_path: Path) -> None:
    conn, vl, vecs = indexed(tmp_path, 5000)
    first = vl.search(conn, T, "chunk", vecs[3], 10, probe=1500, whole_max=8192)  # scored whole
    ((_, lists, _),) = vl._codes.values()
    with conn:
        vl.add(conn, T, "chunk", [("near", "d9", _unit(vecs[3] + 0.001))])
        vl.remove(conn, T, "chunk", ["i00003"])
    after = vl.search(conn, T, "chunk", vecs[3], 10, probe=1500, whole_max=8192)
    assert after == VectorLists().search(conn, T, "chunk", vecs[3], 10, probe=1500, whole_max=8192)
    assert "near" in {i for i, _ in after} and "i00003" not in {i for i, _ in after} and after != first
    ((_, now, _),) = vl._codes.values()
    changed = {lst for lst in now if now[lst] is not lists.get(lst)}
    assert 1 <= len(changed) <= 2 < len(now)  # the lists gaining "near" and losing i00003, no more


def test_the_list_cache_stays_within_its_budget_and_still_answers(tmp_path: Path) -> None:
    conn, vl, vecs = indexed(tmp_path, 5000)
    vl._lists = ListCache(budget=250_000)  # about two of its lists (~555 items of 176 bytes)
    expected = VectorLists().search_many(conn, T, "chunk", [vecs[k] for k in range(0, 5000, 250)], 5, probe=1500)
    for k, want in zip(range(0, 5000, 250), expected, strict=True):
        assert vl.search(conn, T, "chunk", vecs[k], 5, probe=1500) == want
        assert 0 < vl._lists._bytes <= 250_000 and 1 <= len(vl._lists._lists) < 9


def test_a_cached_list_holds_only_its_own_codes(tmp_path: Path) -> None:
    conn, vl, vecs = indexed(tmp_path, 5000)
    vl.search_many(conn, T, "chunk", [vecs[3], vecs[1200]], 10, probe=1500)  # several lists in one read
    cached = [codes for _, codes in vl._lists._lists.values() if codes.ids]
    assert len(cached) > 2
    for codes in cached:  # no view of the read's buffer (it would outlive its slice's share of the budget)
        assert codes.codes.base is None and codes.scales.base is None and codes.lists.base is None
    assert vl._lists._bytes == sum(c.nbytes() for c in cached)


def test_a_file_written_before_the_stamps_gets_them_and_still_answers(tmp_path: Path) -> None:
    conn, vl, vecs = indexed(tmp_path, 5000)
    expected = vl.search(conn, T, "chunk", vecs[42], 10, probe=1500)
    with conn:  # the table as an earlier version made it: no stamp column
        conn.execute("ALTER TABLE vector_lists DROP COLUMN stamp")
    assert "stamp" not in [r[1] for r in conn.execute("PRAGMA table_info(vector_lists)")]
    with conn:
        migrate(conn)
        migrate(conn)  # once only
    assert {s for (s,) in conn.execute("SELECT DISTINCT stamp FROM vector_lists")} == {0}
    assert VectorLists().search(conn, T, "chunk", vecs[42], 10, probe=1500) == expected
    with conn:
        vl.add(conn, T, "chunk", [("near", "d9", _unit(vecs[42] + 0.001))])
    after = vl.search(conn, T, "chunk", vecs[42], 10, probe=1500)
    assert "near" in {i for i, _ in after} and after == VectorLists().search(conn, T, "chunk", vecs[42], 10, probe=1500)
