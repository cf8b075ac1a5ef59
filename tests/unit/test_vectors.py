"""Exact and projected top_cosines-row search (pure numpy)."""

from __future__ import annotations

import numpy as np

from processors.algorithms.vectors import ProjectedIndex, top_cosines
from schemas.tenant import Tenant


def _unit_rows(m: np.ndarray) -> np.ndarray:
    return (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)


def _embedding_like(n: int, seed: int) -> np.ndarray:
    """Anisotropic like sentence embeddings: a 40-dim latent mapped to 384 dims, plus noise."""
    rng = np.random.default_rng(seed)
    latent = rng.standard_normal((n, 40)) * np.linspace(3.0, 0.3, 40)
    return _unit_rows(latent @ rng.standard_normal((40, 384)) + 0.3 * rng.standard_normal((n, 384)))


def test_exact_top_cosines_are_best_first() -> None:
    m = _unit_rows(np.random.default_rng(1).standard_normal((500, 16)))
    q = m[42]
    rows, sims = top_cosines(m, q, 5)
    assert rows[0] == 42 and abs(sims[0] - 1.0) < 1e-5
    assert rows == np.argsort(-(m @ q))[:5].tolist() and sims == sorted(sims, reverse=True)
    assert top_cosines(m, q, 0) == ([], [])


def test_projected_search_finds_nearly_all_true_neighbours() -> None:
    m = _embedding_like(30_000, 2)
    index = ProjectedIndex(m, dims=64, candidates=1000)
    queries = _unit_rows(m[:50] + 0.5 * _embedding_like(50, 3))  # near stored rows, not equal to them
    recall = []
    for q in queries:
        want, _ = top_cosines(m, q, 20)
        got, sims = index.search(q, 20)
        recall.append(len(set(got) & set(want)) / 20)
        assert sims == sorted(sims, reverse=True) and np.allclose(sims, m[got] @ q, atol=1e-5)  # exact scores
    assert np.mean(recall) >= 0.95
    small = ProjectedIndex(m[:500])
    assert small.search(queries[0], 20) == top_cosines(m[:500], queries[0], 20)  # fewer rows than candidates: exact


async def test_a_search_sees_another_writers_entities_at_once(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A process's cached matrix does not hide another process's write from its next search."""
    from processors.stores.local.entity_index import LocalEntityIndex

    rng = np.random.default_rng(3)
    vecs = _unit_rows(rng.standard_normal((30, 16)))
    reader, writer = LocalEntityIndex(tmp_path / "v.db"), LocalEntityIndex(tmp_path / "v.db")
    try:
        await writer.upsert(
            Tenant("u", "c"), [(f"e{i}", f"entity {i}", vecs[i].tolist()) for i in range(29)], model="unit-test"
        )
        assert (await reader.search(Tenant("u", "c"), vecs[29].tolist(), None, 3))[0].iri != "e29"  # matrix now cached
        await writer.upsert(
            Tenant("u", "c"), [("e29", "entity 29", vecs[29].tolist())], model="unit-test"
        )  # another process's write
        hits = await reader.search(Tenant("u", "c"), vecs[29].tolist(), None, 3)
        assert hits[0].iri == "e29" and abs(hits[0].score - 1.0) < 1e-5
    finally:
        await reader.db.close()
        await writer.db.close()
