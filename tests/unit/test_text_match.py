"""Lexical matching and edge scoring (pure functions)."""

from __future__ import annotations

import numpy as np
import pytest

from processors.stores.edge_scoring import best, edge_scores, path_cosines
from processors.stores.text_match import content_tokens, label_match_score, label_phrases, normalize


def test_normalize_splits_snake_case_and_punctuation() -> None:
    assert normalize("What is marie_curie's  birth-place?") == "what is marie curie s birth place"


def test_whole_label_phrase_scores_one() -> None:
    assert label_match_score("marie curie", "where was marie_curie 's husband born ?") == 1.0
    assert label_match_score("curie marie", "where was marie_curie born") < 1.0
    assert label_match_score("the", "the answer") == 0.0  # stopword-only labels name nothing


def test_label_phrases_are_the_word_runs_a_whole_label_can_equal() -> None:
    phrases = label_phrases("Where was Marie_Curie's husband born?")
    assert "marie curie" in phrases and "marie curie s husband" in phrases and "born" in phrases
    assert "where was" not in phrases and "was" not in phrases  # stopwords alone name nothing
    assert "curie marie" not in phrases  # runs keep the question's word order
    assert label_phrases("what is the") == []
    assert max(len(p.split()) for p in label_phrases(" ".join(f"w{i}" for i in range(40)))) == 24
    assert content_tokens("the wife of mae_west") == ["wife", "mae", "west"]


def test_edge_scores_weight_relation_and_far_end() -> None:
    q = np.array([1.0, 0.0, 0.0])
    vecs = {"p-good": [1.0, 0.0, 0.0], "p-bad": [0.0, 1.0, 0.0], "e": [0.0, 0.0, 1.0]}
    good, bad, missing = edge_scores(q, [("p-good", "e"), ("p-bad", "e"), ("p-unknown", "none")], vecs)
    assert good > bad == missing == 0.0


def test_best_orders_by_score_and_shares_budget_between_sources() -> None:
    scores = [0.9, 0.8, 0.7, 0.6, 0.5, 0.1]
    assert best(scores, 3) == [0, 1, 2]
    groups = ["hub", "hub", "hub", "hub", "hub", "small"]
    picked = best(scores, 4, groups)
    assert 5 in picked and len(picked) == 4  # the small entity's only edge is not crowded out
    assert picked[0] == 0


def test_path_cosines_favour_the_relation_that_completes_the_question() -> None:
    # the question names two relations ("parent of", "born in"); an unrelated one is far
    parent, born, other = np.eye(4)[0], np.eye(4)[1], np.eye(4)[2]
    q = 0.6 * parent + 0.5 * born + 0.1 * other
    vecs = {"parent": parent, "born": born, "other": other}
    alone = path_cosines(q, [()], ["parent", "born", "other"], vecs)
    assert alone[(), "parent"] > alone[(), "born"] > alone[(), "other"]  # alone, "parent" wins again
    after = path_cosines(q, [("parent",)], ["parent", "born", "other"], vecs)
    assert after[("parent",), "born"] > after[("parent",), "parent"] > after[("parent",), "other"]
    norm = np.linalg.norm(q)
    assert after[("parent",), "born"] == pytest.approx((0.6 + 0.5) / norm / np.sqrt(2), abs=1e-6)
    assert after[("parent",), "parent"] == pytest.approx(0.6 / norm, abs=1e-6)  # a repeat adds nothing
    assert path_cosines(q, [], ["born"], vecs) == {}
