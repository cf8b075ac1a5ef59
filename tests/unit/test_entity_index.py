"""The embedded entity index: int8 codes in SQLite inverted lists, searched from the file; an index
written before (float32 vectors) converted on open."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from processors.algorithms.vectors import quantize
from processors.stores.local import entity_index
from processors.stores.local.entity_index import LocalEntityIndex
from processors.stores.sqlite.vector_lists import TRAIN_AT
from schemas.tenant import Tenant

T = Tenant("u", "c")
INT8 = 2e-3  # how far an int8 code's cosine may be from the float32 one (384 dims: about 1e-3)


def _unit_rows(m: np.ndarray) -> np.ndarray:
    return (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)


def _embedding_like(n: int, seed: int, dims: int = 384) -> np.ndarray:
    """Anisotropic like sentence embeddings: a 40-dim latent mapped to `dims` dims, plus noise."""
    rng = np.random.default_rng(seed)
    latent = rng.standard_normal((n, 40)) * np.linspace(3.0, 0.3, 40)
    return _unit_rows(latent @ rng.standard_normal((40, dims)) + 0.3 * rng.standard_normal((n, dims)))


def test_int8_codes_keep_cosines_within_a_thousandth() -> None:
    m = _embedding_like(2000, 1)
    scales, codes = quantize(m)
    assert codes.dtype == np.int8 and codes.nbytes == m.nbytes // 4
    q = _embedding_like(1, 2)[0]
    err = np.abs((codes.astype(np.float32) * scales[:, None]) @ q - m @ q)
    assert err.max() < INT8 and err.mean() < INT8 / 4


async def test_a_search_sees_another_writers_entities_at_once(tmp_path: Path) -> None:
    """A process's cached centroids do not hide another process's write from its next search."""
    vecs = _unit_rows(np.random.default_rng(3).standard_normal((30, 16)))
    reader, writer = LocalEntityIndex(tmp_path / "v.db"), LocalEntityIndex(tmp_path / "v.db")
    try:
        await writer.upsert(T, [(f"e{i}", f"entity {i}", vecs[i].tolist()) for i in range(29)], model="unit-test")
        assert (await reader.search(T, vecs[29].tolist(), None, 3))[0].iri != "e29"  # the space now cached
        await writer.upsert(T, [("e29", "entity 29", vecs[29].tolist())], model="unit-test")  # another process
        hits = await reader.search(T, vecs[29].tolist(), None, 3)
        assert hits[0].iri == "e29" and abs(hits[0].score - 1.0) < INT8
    finally:
        await reader.close()
        await writer.close()


@pytest.mark.parametrize("resident", [True, False])
async def test_a_large_collection_is_searched_through_trained_lists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, resident: bool
) -> None:
    """Past TRAIN_AT entities the lists are trained; a search finds the exact nearest ones (int8
    scores): from memory while the space is small, else from the file, keeping no copy of it."""
    if not resident:
        monkeypatch.setattr(entity_index, "RESIDENT_MAX", 0)
    n = TRAIN_AT + 2000
    m = _embedding_like(n, 4)
    index = LocalEntityIndex(tmp_path / "v.db")
    try:
        for start in range(0, n, 1000):  # in batches, as a load writes
            rows = [(f"e{i}", f"entity {i}", m[i].tolist()) for i in range(start, min(n, start + 1000))]
            await index.upsert(T, rows, model="unit-test")
        lists = await index.db.read(
            lambda c: c.execute("SELECT lists FROM vector_spaces WHERE space = 'entity'").fetchone()
        )
        assert lists[0] > 1
        queries = _unit_rows(m[:40] + 0.5 * _embedding_like(40, 5))  # near stored rows, not equal to them
        recall = []
        for q in queries:
            want = {f"e{i}" for i in np.argsort(-(m @ q))[:10]}
            hits = await index.search(T, q.tolist(), None, 10)
            recall.append(len(want & {h.iri for h in hits}) / 10)
            exact = m[[int(h.iri[1:]) for h in hits]] @ q
            assert np.abs(exact - [h.score for h in hits]).max() < INT8
            assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        assert np.mean(recall) == 1.0 if resident else np.mean(recall) >= 0.95
        assert bool(index.lists._codes) == resident  # held in memory only while small
    finally:
        await index.close()


async def test_lookups_by_iri_and_a_kind_that_changes(tmp_path: Path) -> None:
    m = _embedding_like(6, 6, dims=32)
    index = LocalEntityIndex(tmp_path / "v.db")
    try:
        await index.upsert(T, [(f"e{i}", f"Entity {i}", m[i].tolist()) for i in range(4)], model="unit-test")
        await index.upsert(T, [("p", "works for", m[4].tolist())], "predicate", model="unit-test")
        vecs = await index.vectors(T, ["e0", "p", "missing"])
        assert sorted(vecs) == ["e0", "p"] and abs(float(np.dot(vecs["e0"], m[0])) - 1.0) < INT8
        sims = await index.similarities(T, m[1].tolist(), ["e1", "e2", "p", "missing"])
        assert sorted(sims) == ["e1", "e2", "p"]
        assert all(abs(sims[k] - float(m[1] @ m[n])) < INT8 for k, n in (("e1", 1), ("e2", 2), ("p", 4)))
        assert [h.iri for h in await index.nearest_predicates(T, m[4].tolist(), 3)] == ["p"]
        await index.upsert(T, [("e3", "uses", m[3].tolist())], "predicate", model="unit-test")  # e3 is a predicate now
        assert "e3" not in {h.iri for h in await index.search(T, m[3].tolist(), None, 10)}
        assert {h.iri for h in await index.nearest_predicates(T, m[3].tolist(), 3)} == {"e3", "p"}
        assert await index.collections("u") == {"c": 3}
        await index.delete(T, ["e0", "p"])
        assert sorted(await index.vectors(T, ["e0", "p", "e1"])) == ["e1"]
        await index.delete_collection(T)
        assert await index.collections("u") == {} and await index.vectors(T, ["e1"]) == {}
    finally:
        await index.close()


def _old_index(path: Path, rows: list[tuple[str, str, str, str, np.ndarray]]) -> None:
    """A vectors.db as the float32 index wrote it (vec BLOB, no name column, scope_version)."""
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE vectors (user TEXT NOT NULL, collection TEXT NOT NULL, iri TEXT NOT NULL,
            kind TEXT NOT NULL, label TEXT NOT NULL, vec BLOB NOT NULL,
            PRIMARY KEY (user, collection, iri)) WITHOUT ROWID;
        CREATE TABLE scope_version (user TEXT NOT NULL, collection TEXT NOT NULL, version INTEGER NOT NULL,
            PRIMARY KEY (user, collection)) WITHOUT ROWID;
        CREATE TABLE vector_model (user TEXT NOT NULL, collection TEXT NOT NULL, model TEXT NOT NULL,
            dimensions INTEGER NOT NULL, PRIMARY KEY (user, collection)) WITHOUT ROWID;
        INSERT INTO vector_model VALUES ('u', 'c', 'unit-test', 32), ('u', 'd', 'unit-test', 32);
        """
    )
    conn.executemany(
        "INSERT INTO vectors VALUES (?,?,?,?,?,?)", [(u, c, i, k, lbl, v.tobytes()) for u, c, i, k, lbl, v in rows]
    )
    conn.commit()
    conn.close()


async def test_an_index_written_with_float32_vectors_is_converted_on_open(tmp_path: Path) -> None:
    m = _embedding_like(5, 7, dims=32)
    rows = [("u", "c", f"e{i}", "entity", f"Entity {i}", m[i]) for i in range(3)]
    rows += [("u", "c", "p", "predicate", "works for", m[3]), ("u", "d", "x", "entity", "Other", m[4])]
    _old_index(tmp_path / "v.db", rows)
    index = LocalEntityIndex(tmp_path / "v.db")
    try:
        tables = await index.db.read(lambda c: {r[0] for r in c.execute("SELECT name FROM sqlite_master")})
        assert "vectors_float32" not in tables and "scope_version" not in tables
        cols = await index.db.read(lambda c: [r[1] for r in c.execute("PRAGMA table_info(vectors)")])
        assert "vec" not in cols
        hits = await index.search(T, m[1].tolist(), "what is entity 2?", 2)
        assert [h.iri for h in hits] == ["e2", "e1"] and hits[0].lexical and abs(hits[1].score - 1.0) < INT8
        assert await index.named(T, ["entity 0"]) == {"entity 0": "e0"}
        assert [h.iri for h in await index.nearest_predicates(T, m[3].tolist(), 2)] == ["p"]
        assert await index.collections("u") == {"c": 3, "d": 1}
        assert list(await index.vectors(Tenant("u", "d"), ["x", "e0"])) == ["x"]
        await index.upsert(T, [("e9", "Entity 9", m[4].tolist())], model="unit-test")  # the model was kept
    finally:
        await index.close()
    again = LocalEntityIndex(tmp_path / "v.db")  # converted once: a second open finds nothing to do
    try:
        assert await again.collections("u") == {"c": 4, "d": 1}
    finally:
        await again.close()
