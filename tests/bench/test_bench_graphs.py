"""The generated benchmark graphs are deterministic, power-law, and cached by parameters + code;
PathQuestion parsing and coverage."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.graph import graphs
from bench.graph.common import sample as _sample
from bench.graph.pathquestion import covered, parse_questions
from bench.harness.targets import targets


def test_same_spec_same_graph_and_questions() -> None:
    spec = graphs.GraphSpec("t", 3000, seed=3, questions=20)
    a, b = graphs.generate(spec), graphs.generate(spec)
    assert np.array_equal(a.edges, b.edges) and a.entity_labels == b.entity_labels
    assert graphs.questions(a) == graphs.questions(b)
    other = graphs.generate(graphs.GraphSpec("t", 3000, seed=4))
    assert not np.array_equal(a.edges, other.edges)


def test_graph_has_the_asked_size_distinct_edges_and_heavy_tailed_degrees() -> None:
    g = graphs.generate(graphs.GraphSpec("t", 20_000, seed=1))
    assert len(g.edges) == 20_000
    assert len({tuple(e) for e in g.edges.tolist()}) == 20_000
    assert (g.edges[:, 0] != g.edges[:, 2]).all()
    deg = np.bincount(np.concatenate([g.edges[:, 0], g.edges[:, 2]]), minlength=g.spec.entities)
    assert deg.max() > 20 * np.median(deg)  # hubs
    assert len(set(g.entity_labels)) == g.spec.entities
    assert all(lab.replace(" ", "").isalpha() for lab in g.entity_labels)  # name-like labels


def test_questions_follow_real_two_hop_paths() -> None:
    g = graphs.generate(graphs.GraphSpec("t", 5000, seed=2, questions=30))
    index = {lab: i for i, lab in enumerate(g.entity_labels)}
    rel = {lab: i for i, lab in enumerate(g.relation_labels)}
    edges = {tuple(e) for e in g.edges.tolist()}
    qs = graphs.questions(g)
    assert len(qs) == 30
    for q in qs:
        e0, e1, e2 = (index[x] for x in q.path)
        r2, r1 = q.question.removeprefix("what is the ").split(" of the ")[0], q.question.split(" of the ")[1]
        r1 = r1.rsplit(" of ", 1)[0]
        assert (e0, rel[r1], e1) in edges and (e1, rel[r2], e2) in edges
        assert q.answer == q.path[-1] and q.question.endswith(f"{q.path[0]}?")


def test_hub_questions_start_at_the_entities_with_most_out_edges() -> None:
    g = graphs.generate(graphs.GraphSpec("t", 20_000, seed=2, questions=25))
    out_degree = np.bincount(g.edges[:, 0], minlength=g.spec.entities)
    cutoff = np.sort(out_degree)[-(g.spec.entities // 100)]
    index = {lab: i for i, lab in enumerate(g.entity_labels)}
    rel = {lab: i for i, lab in enumerate(g.relation_labels)}
    edges = {tuple(e) for e in g.edges.tolist()}
    hub_qs = graphs.hub_questions(g)
    assert len(hub_qs) == 25 and hub_qs != graphs.questions(g)
    for q in hub_qs:
        e0, e1, e2 = (index[x] for x in q.path)
        assert out_degree[e0] >= cutoff > 5 * np.median(out_degree)
        assert (e0, rel[q.relations[0]], e1) in edges and (e1, rel[q.relations[1]], e2) in edges


def test_cache_key_changes_with_parameters_not_with_name_of_nothing() -> None:
    a = graphs.cache_key(graphs.GraphSpec("t", 1000))
    assert a == graphs.cache_key(graphs.GraphSpec("t", 1000))
    assert a != graphs.cache_key(graphs.GraphSpec("t", 1001))
    assert a != graphs.cache_key(graphs.GraphSpec("t", 1000, gamma=2.1))


async def test_load_is_cached_between_runs(tmp_path: Path) -> None:
    spec = graphs.GraphSpec("tiny", 300, questions=5)
    home, info = await graphs.ensure_loaded(spec, tmp_path, log=lambda _m: None)
    assert info["counts"]["entities"] == spec.entities and (home / "graph.db").exists()
    stamp = (home / "loaded.json").stat().st_mtime_ns
    again, info2 = await graphs.ensure_loaded(spec, tmp_path, log=lambda _m: None)
    assert again == home and info2 == info and (home / "loaded.json").stat().st_mtime_ns == stamp
    assert len(graphs.load_questions(home)) == 5


def test_pathquestion_gold_answer_is_the_path_end_label() -> None:
    line = "where was a_b 's wife born ?\tparis_x(paris_x/)\ta_b#spouse#c_d#place_of_birth#paris_x#<end>#paris_x"
    (q,) = parse_questions([line, "", "broken line"])
    assert (q.answer, q.hops) == ("paris x", 2)
    assert covered("paris x", [("C D", "place of birth", "Paris X")])
    assert not covered("paris x", [("C D", "place of birth", "Paris")])


def test_sample_is_spread_and_targets_flag_misses() -> None:
    assert _sample(list(range(10)), 5) == [0, 2, 4, 6, 8]
    res = {
        "pathquestion-3h": {
            "store_round_trips_max": 8,  # 3 for the seeds, one per hop, one for labels: 7 at most
            "max_path_length": 3,
            "answer_coverage": 0.995,
            "answer_coverage_edge_limit_25": 0.9,
            "label_cache_hit_ratio": 0.95,
        }
    }
    t = targets({"embedded": res})
    assert t["pathquestion-3h.store_round_trips"]["met"] is False
    assert t["pathquestion-3h.answer_coverage"]["met"] is True
    assert t["pathquestion-3h.answer_coverage_edge_limit_25"]["met"] is False


def test_code_shape_ignores_docstrings_not_code() -> None:
    def a(x: int) -> int:
        """One docstring."""
        return x + 1

    def b(x: int) -> int:
        """Another docstring."""
        return x + 1

    def c(x: int) -> int:
        """One docstring."""
        return x + 2

    shape = graphs._code_shape
    assert shape(a).replace("'a'", "'b'") == shape(b) and shape(a).replace("'a'", "'c'") != shape(c)


def test_deployed_targets_cover_every_backend_that_ran() -> None:
    res = {
        "pulsar": {
            "bus_round_trip": {"pulsar_overhead_per_round_trip_p50_ms": 2.5},
            "powerlaw-1m": {"p50_ms": 50.0, "speedup_p50": 25.0, "throughput_rps": {"1": 10.0, "8": 16.0}},
        },
        "cassandra": {"pathquestion-3h": {"p50_ms": 59.0, "throughput_rps": {"1": 10.0, "8": 14.0}}},
        "neo4j": "skipped: no neo4j server on 127.0.0.1:7687",
    }
    t = targets(res)
    assert t["pulsar.overhead_per_round_trip_p50_ms"]["met"] is True
    assert t["pulsar.powerlaw-1m.p50_ms"]["met"] is False
    assert t["pulsar.powerlaw-1m.speedup_p50"]["met"] is True
    assert t["pulsar.powerlaw-1m.throughput_8_over_1"] == {"value": 1.6, "target": ">= 1.5", "met": True}
    assert t["cassandra.pathquestion-3h.p50_ms"]["met"] is True
    assert t["cassandra.pathquestion-3h.throughput_8_over_1"]["met"] is False
    assert not any(k.startswith("neo4j") for k in t)
