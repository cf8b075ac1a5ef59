"""Issue 31's measurement protocol: the seeded halves, the titles-removed corpus, the index cache
key, the gains over the best of the three baselines, the targets and the defaults' labels."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import pytest

from bench.docqa import homes as docqa_homes
from bench.docqa.defaults import CHOSEN_ON, KINDS, MODELS, defaults
from bench.docqa.halves import halves
from bench.docqa.protocol import best_baseline, gain_over_best_baseline, split_ids, summarise_half, targets

# sha256 of the sorted tuning-half ids (first 16 hex digits): the split must never move, or a
# default chosen on the tuning half would have seen validation questions.
TUNING_HALF = {"hotpotqa": "0e6460929cb3dab9", "musique": "4e095d050a40cabc"}


@pytest.mark.parametrize("name", sorted(docqa_homes.SETS))
def test_the_split_is_stable_disjoint_and_covers_every_question(name: str) -> None:
    qs = docqa_homes.questions(name)
    split = split_ids(qs)
    tuning, validation = set(split["tuning"]), set(split["validation"])
    assert not tuning & validation
    assert tuning | validation == {str(q["id"]) for q in qs}
    assert len(split["tuning"]) - len(split["validation"]) in (0, 1)
    assert hashlib.sha256(",".join(sorted(tuning)).encode()).hexdigest()[:16] == TUNING_HALF[name]
    shuffled = qs[:]
    random.Random(7).shuffle(shuffled)
    assert split_ids(shuffled) == split  # by id, not by the file's order


def test_an_odd_count_gives_the_tuning_half_the_extra_question() -> None:
    got = halves([{"id": i} for i in range(7)])
    assert (len(got["tuning"]), len(got["validation"])) == (4, 3)


@pytest.mark.parametrize("name", sorted(docqa_homes.SETS))
def test_the_notitles_variant_drops_exactly_the_titles(name: str) -> None:
    kept = [json.loads(x) for x in docqa_homes.corpus_lines(name, "titles")]
    dropped = [json.loads(x) for x in docqa_homes.corpus_lines(name, "notitles")]
    assert len(kept) == len(dropped) and any(d.get("title") for d in kept)
    for k, d in zip(kept, dropped, strict=True):
        assert "title" not in d
        assert d == {f: v for f, v in k.items() if f != "title"}  # id, text and the rest unchanged


def test_unknown_variant_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown variant"):
        docqa_homes.corpus_lines("hotpotqa", "lowercase")


def test_cache_key_follows_the_corpus_and_the_indexing_code(tmp_path: Path) -> None:
    for d in docqa_homes.INDEXING_SOURCES:
        (tmp_path / d).mkdir(parents=True)
    src = tmp_path / docqa_homes.INDEXING_SOURCES[0] / "chunker.py"
    src.write_text("CHUNK = 200\n")
    (tmp_path / "processors" / "retrieval").mkdir()
    other = tmp_path / "processors" / "retrieval" / "rank.py"
    other.write_text("K = 1\n")
    lines = ['{"id": "a", "text": "x"}']
    key = docqa_homes.cache_key(lines, tmp_path)
    assert docqa_homes.cache_key(lines, tmp_path) == key
    assert docqa_homes.cache_key(['{"id": "a", "text": "y"}'], tmp_path) != key
    other.write_text("K = 2\n")  # query-time code does not rebuild the index
    assert docqa_homes.cache_key(lines, tmp_path) == key
    src.write_text("CHUNK = 100\n")
    assert docqa_homes.cache_key(lines, tmp_path) != key


RECALLS = {
    "vector": {"recall@2": 0.50, "recall@5": 0.70},
    "lexical": {"recall@2": 0.60, "recall@5": 0.65},
    "fused": {"recall@2": 0.55, "recall@5": 0.80},  # the best at 5: the old bench left it out
    "dense_text_only": {"recall@2": 0.40, "recall@5": 0.60},
    "lazy_rag": {"recall@2": 0.75, "recall@5": 0.90},
}


def test_gain_is_over_the_best_of_vector_lexical_and_fused() -> None:
    best = best_baseline(RECALLS)
    assert best["recall@2"] == {"name": "lexical", "value": 0.60}
    assert best["recall@5"] == {"name": "fused", "value": 0.80}
    assert gain_over_best_baseline(RECALLS, "lazy_rag") == {"recall@2": 0.15, "recall@5": 0.10}


def test_each_half_is_summarised_from_its_own_questions() -> None:
    rows = {name: {"q1": r, "q2": {k: 0.0 for k in r}} for name, r in RECALLS.items()}
    rows["lazy_rag"]["q2"] = {"recall@2": 1.0, "recall@5": 1.0}
    one = summarise_half(rows, ["q1"])
    assert one["questions"] == 1 and one["recall"]["lazy_rag"] == RECALLS["lazy_rag"]
    assert one["gain_over_best_baseline"] == {"lazy_rag": {"recall@2": 0.15, "recall@5": 0.10}}
    assert one["lazy_rag_gain_over_dense_text_only"] == {"recall@2": 0.35, "recall@5": 0.30}
    other = summarise_half(rows, ["q2"])
    assert other["gain_over_best_baseline"]["lazy_rag"] == {"recall@2": 1.0, "recall@5": 1.0}


def _variant(r5: dict[str, float], gain5: dict[str, float], p50: float) -> dict:
    by_half = {h: {"recall": {"lazy_rag": {"recall@2": 0.9, "recall@5": r5[h]}},
                  "lazy_rag_gain_over_dense_text_only": {"recall@5": gain5[h]}} for h in r5}  # fmt: skip
    return {"halves": by_half, "latency": {"lazy_rag": {"p50_ms": p50, "p95_ms": 2 * p50}},
            "index": {"chunks": 2000, "llm_calls_at_index_time": 0, "index_s": 100}}  # fmt: skip


def test_targets_are_read_on_the_validation_half() -> None:
    tuned = {"tuning": 0.99, "validation": 0.90}
    section = {"hotpotqa": {"titles": _variant(tuned, {"tuning": 0, "validation": 0}, 150.0),
                            "notitles": _variant(tuned, {"tuning": 0.20, "validation": 0.05}, 250.0)}}  # fmt: skip
    got = targets(section)
    assert got["hotpotqa.titles.validation.lazy_rag.recall@5 (issue 31)"] == {
        "value": 0.90,
        "target": ">= 0.95",
        "met": False,
    }
    assert got["hotpotqa.titles.validation.lazy_rag.recall@2 (issue 31)"]["met"] is True
    gain = got["hotpotqa.notitles.validation.lazy_rag_recall@5_gain_over_dense_text_only (issue 31)"]
    assert gain == {"value": 0.05, "target": ">= 0.08", "met": False}
    assert got["hotpotqa.titles.lazy_rag_p50_ms (2000 chunks; issue 31)"]["met"] is True
    assert got["hotpotqa.notitles.lazy_rag_p50_ms (2000 chunks; issue 31)"]["met"] is False
    assert got["llm_calls_at_index_time (every variant; issues 31 and 40)"]["met"] is True
    assert got["musique.titles.validation.lazy_rag.recall@5 (issue 31)"]["met"] is None  # not measured


def _issue_40_variant(r2: float, r5: float, p50: float, p95: float, cli: tuple[float, float] | None) -> dict:
    """A variant whose validation half reads `r2`/`r5` (the tuning half reads 1.0: it must not count)."""

    def half(r2: float, r5: float) -> dict:
        return {"recall": {"lazy_rag": {"recall@2": r2, "recall@5": r5}},
                "lazy_rag_gain_over_dense_text_only": {"recall@5": 0.1}}  # fmt: skip

    halves = {"tuning": half(1.0, 1.0), "validation": half(r2, r5)}
    lazy: dict = {"p50_ms": p50, "p95_ms": p95}
    if cli:
        lazy["cli"] = {"batch": {"p50_ms": cli[0], "p95_ms": cli[1]}}
    index = {"chunks": 2000, "llm_calls_at_index_time": 0, "index_s": 100}
    return {"halves": halves, "latency": {"lazy_rag": lazy}, "index": index}


def test_issue_40_targets_differ_by_variant_and_are_read_on_the_validation_half() -> None:
    section = {
        "hotpotqa": {  # .84 meets the titles-removed .83 but not the titles-kept .85
            "titles": _issue_40_variant(0.84, 0.97, 200.0, 400.0, (200.1, 399.0)),
            "notitles": _issue_40_variant(0.84, 0.9499, 199.0, 400.1, None),
        },
        "musique": {"notitles": _issue_40_variant(0.62, 0.76, 150.0, 300.0, (900.0, 1500.0))},
    }
    section["musique"]["notitles"]["index"]["llm_calls_at_index_time"] = 1
    got = {k: v for k, v in targets(section).items() if k.endswith("(issue 40)")}
    assert got["hotpotqa.titles.validation.lazy_rag.recall@2 (issue 40)"] == {
        "value": 0.84,
        "target": ">= 0.85",
        "met": False,
    }
    assert got["hotpotqa.notitles.validation.lazy_rag.recall@2 (issue 40)"]["target"] == ">= 0.83"
    assert got["hotpotqa.notitles.validation.lazy_rag.recall@2 (issue 40)"]["met"] is True
    assert got["hotpotqa.titles.validation.lazy_rag.recall@5 (issue 40)"]["met"] is True  # equal meets
    assert got["hotpotqa.notitles.validation.lazy_rag.recall@5 (issue 40)"]["met"] is False
    assert got["musique.notitles.validation.lazy_rag.recall@2 (issue 40)"] == {
        "value": 0.62,
        "target": ">= 0.62",
        "met": True,
    }
    assert got["musique.notitles.validation.lazy_rag.recall@5 (issue 40)"]["met"] is True
    assert got["musique.titles.validation.lazy_rag.recall@5 (issue 40)"] == {
        "value": None,
        "target": ">= 0.84",
        "met": None,
    }
    assert got["hotpotqa.titles.lazy_rag_p50_ms (issue 40)"]["met"] is True  # 200 <= 200
    assert got["hotpotqa.titles.lazy_rag_p95_ms (issue 40)"]["met"] is True
    assert got["hotpotqa.notitles.lazy_rag_p95_ms (issue 40)"] == {"value": 400.1, "target": "<= 400.0", "met": False}
    assert got["hotpotqa.titles.lazy_rag_cli_batch_p50_ms (issue 40)"]["met"] is False
    assert got["hotpotqa.titles.lazy_rag_cli_batch_p95_ms (issue 40)"]["met"] is True
    assert got["hotpotqa.notitles.lazy_rag_cli_batch_p50_ms (issue 40)"]["met"] is None  # no CLI run
    assert got["musique.notitles.lazy_rag_cli_batch_p95_ms (issue 40)"]["value"] == 1500.0
    calls = targets(section)["llm_calls_at_index_time (every variant; issues 31 and 40)"]
    assert calls == {"value": 1, "target": "= 0", "met": False}


def test_every_ranking_default_says_where_it_was_chosen() -> None:
    for processor, model in MODELS.items():
        assert set(CHOSEN_ON[processor]) == set(model.model_fields), f"{processor}: label every knob, no other"
    for processor, knobs in defaults().items():
        for name, d in knobs.items():
            assert d["chosen_on"].startswith(KINDS), f"{processor}.{name}: {d['chosen_on']!r}"
            assert d["value"] == MODELS[processor]().model_dump(mode="json")[name]
