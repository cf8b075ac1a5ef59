"""The vector-index section's pure parts: the generated corpus (shape, unit rows, the same rows
whatever the blocks, a document's chunks near each other), the exact answers, recall, the scope."""

from __future__ import annotations

import numpy as np

from bench.documents import vector_data as data
from bench.documents.vector_index import scope


def _centres(n: int = 50, dim: int = 16) -> np.ndarray:
    return data.unit(np.random.default_rng(1).standard_normal((n, dim)).astype(np.float32))


def test_generated_rows_are_unit_and_do_not_depend_on_the_blocks() -> None:
    spec = data.DataSpec(size=95, chunks_per_doc=10)
    whole = data.generate_block(_centres(), spec, 0, 95)
    pieces = np.concatenate([data.generate_block(_centres(), spec, a, min(95, a + 7)) for a in range(0, 95, 7)])
    assert whole.shape == (95, 16) and whole.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(whole, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(pieces, whole, atol=1e-6)


def test_a_documents_chunks_are_nearer_each_other_than_other_documents() -> None:
    spec = data.DataSpec(size=400, chunks_per_doc=10, noise=0.3)
    rows = data.generate_block(_centres(200, 64), spec, 0, 400)
    sims = rows @ rows.T
    same = data.document_of(np.arange(400), spec)
    within = sims[(same[:, None] == same[None, :]) & ~np.eye(400, dtype=bool)].mean()
    across = sims[same[:, None] != same[None, :]].mean()
    assert within > across + 0.2


def test_exact_top_is_the_brute_force_order_across_blocks_and_within_a_scope(monkeypatch) -> None:
    monkeypatch.setattr(data, "BLOCK", 13)  # several blocks, a partial last one
    rows = data.unit(np.random.default_rng(2).standard_normal((100, 8)).astype(np.float32))
    queries = rows[:5] + 0.01
    expected = np.argsort(-(queries @ rows.T), axis=1, kind="stable")[:, :10]
    np.testing.assert_array_equal(data.exact_top(rows, queries), expected)
    ids = np.arange(40, 80)
    scoped = data.exact_top(rows, queries, ids=ids)
    assert set(scoped.ravel().tolist()) <= set(ids.tolist())
    np.testing.assert_array_equal(scoped, 40 + np.argsort(-(queries @ rows[40:80].T), axis=1, kind="stable")[:, :10])


def test_recall_counts_shared_ids_among_the_first_k() -> None:
    truth = np.asarray([list(range(10)), list(range(10, 20))])
    found = [np.asarray([0, 1, 2, 3, 4, 99, 98, 97, 96, 95, 5]), np.asarray(list(range(10, 20)))]
    assert data.recall_at(found, truth) == 0.75  # the 11th id (5) is past k: not counted
    assert data.recall_at([np.asarray([], dtype=np.int64)] * 2, truth) == 0.0


def test_the_scope_is_one_percent_of_the_documents_and_all_their_rows() -> None:
    spec = data.DataSpec(size=100_000, chunks_per_doc=10)
    docs, rows = scope(spec)
    assert len(docs) == 100 and len(set(docs.tolist())) == 100
    assert len(rows) == 1000 and set(data.document_of(rows, spec).tolist()) == set(docs.tolist())


def test_todays_ivf_and_its_resident_copy_answer_through_the_benchs_interface(tmp_path) -> None:
    from bench.documents.vector_engines import ResidentIvf, TodayIvf
    from bench.documents.vector_index import blocks

    spec = data.DataSpec(size=12000, chunks_per_doc=10, noise=0.2)  # past PROBE: the lists are probed
    corpus = data.generate_block(_centres(300, 32), spec, 0, spec.size)
    queries = corpus[::1200] + 0.01
    truth = data.exact_top(corpus, queries)
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    rows, resident = TodayIvf(tmp_path / "a", 10), ResidentIvf(tmp_path / "b", 10)
    resident.index.resident.resident_at = 1000  # the store copies spaces past 50,000 items
    recall = []
    for engine in (rows, resident):
        engine.build(blocks(corpus))
        found = [engine.search(q, data.K) for q in queries]
        assert all(len(f) == data.K and 0 <= f.min() and f.max() < spec.size for f in found)
        recall.append(data.recall_at([engine.rescored(q, data.K, corpus) for q in queries], truth))
    # as the store searches (RESCORE * k hits rescored): the copy's codes are coarser than int8 (its
    # own top 10 among near-equal neighbours is not), its top 40 holds the same ten
    assert recall[0] >= 0.9 and recall[1] >= recall[0] - 0.05
    assert resident.index.resident._spaces  # the copy was made at the build's end, and saved:
    assert resident.bytes() > rows.bytes() * 1.05
