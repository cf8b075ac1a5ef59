"""The relevance package on its own: text matching, edge scoring, fair share, path continuation
and the ranking every store applies (pure functions; a dict stands in for the entity index)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pytest

from processors.algorithms.edges import (
    PREDICATE_WEIGHT,
    RawEdge,
    best_edges,
    edge_scores,
    path_cosine_table,
    rank_neighbours,
)
from processors.algorithms.entities import rank_entity_hits
from processors.algorithms.text_match import content_tokens, label_match_score, label_phrases, normalize
from processors.algorithms.vectors import cosines
from schemas.tenant import Tenant
from schemas.triples import NeighboursQuery


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
    vecs = {"p-good": [1.0, 0.0, 0.0], "p-bad": [0.0, 1.0, 0.0], "e": [0.0, 0.0, 1.0], "near": [0.6, 0.8, 0.0]}
    sims = cosines(q, ["p-good", "p-bad", "e", "near", "p-unknown"], vecs)
    assert sims == pytest.approx({"p-good": 1.0, "p-bad": 0.0, "e": 0.0, "near": 0.6})  # no vector: absent
    edges = [("p-good", "e"), ("p-bad", "e"), ("p-unknown", "none"), ("p-bad", "near"), ("p-good", None)]
    good, bad, missing, far_only, literal = edge_scores(*zip(*edges, strict=True), sims).tolist()
    assert good == pytest.approx(PREDICATE_WEIGHT) and literal == good  # a literal far end adds 0
    assert bad == missing == 0.0
    assert far_only == pytest.approx((1 - PREDICATE_WEIGHT) * 0.6)
    path_won = edge_scores(*zip(*edges[:2], strict=True), sims, [0.5, 0.25]).tolist()
    assert path_won == pytest.approx([0.9 * 0.5, 0.9 * 0.25])  # path scores win


def test_best_orders_by_score_and_shares_budget_between_sources() -> None:
    scores = [0.9, 0.8, 0.7, 0.6, 0.5, 0.1]
    assert best_edges(scores, 3) == [0, 1, 2]
    groups = ["hub", "hub", "hub", "hub", "hub", "small"]
    picked = best_edges(scores, 4, groups)
    assert 5 in picked and len(picked) == 4  # the small entity's only edge is not crowded out
    assert picked[0] == 0


def test_path_cosines_favour_the_relation_that_completes_the_question() -> None:
    # the question names two relations ("parent of", "born in"); an unrelated one is far
    parent, born, other = np.eye(4)[0], np.eye(4)[1], np.eye(4)[2]
    q = 0.6 * parent + 0.5 * born + 0.1 * other
    vecs = {"parent": parent, "born": born, "other": other}
    table = path_cosine_table(q, [(), ("parent",)], ["parent", "born", "other"], vecs)
    alone, after = (dict(zip(["parent", "born", "other"], row.tolist(), strict=True)) for row in table)
    assert alone["parent"] > alone["born"] > alone["other"]  # alone, "parent" wins again
    assert after["born"] > after["parent"] > after["other"]
    norm = np.linalg.norm(q)
    assert after["born"] == pytest.approx((0.6 + 0.5) / norm / np.sqrt(2), abs=1e-6)
    assert after["parent"] == pytest.approx(0.6 / norm, abs=1e-6)  # a repeat adds nothing
    assert path_cosine_table(q, [], ["born"], vecs).shape == (0, 1)


@dataclass
class Vectors:
    """A dict of label vectors behind the entity-index calls ranking makes (counts the calls)."""

    table: dict[str, list[float]]
    calls: int = 0

    async def similarities(self, tenant: Tenant, vector: Sequence[float], iris: Sequence[str]) -> dict[str, float]:
        self.calls += 1
        return cosines(vector, iris, self.table)

    async def vectors(self, tenant: Tenant, iris: Sequence[str]) -> dict[str, list[float]]:
        self.calls += 1
        return {i: self.table[i] for i in iris if i in self.table}


def _edge(s: str, p: str, o: str) -> RawEdge:
    return (s, p, o, 0, "", "")


async def test_rank_neighbours_dedupes_scores_and_keeps_the_best() -> None:
    q = [1.0, 0.0, 0.0]
    index = Vectors({"good": [1.0, 0.0, 0.0], "bad": [0.0, 1.0, 0.0], "x": [0.0, 0.0, 1.0]})
    found = [(_edge("a", "bad", "x"), "a"), (_edge("a", "good", "x"), "a"), (_edge("a", "good", "x"), "x")]
    query = NeighboursQuery(user="u", collection="c", entities=["a", "x"], query_vector=q, max_returned=1)
    res = await rank_neighbours(found, 3, query, index)
    assert [t.p.value for t in res.triples] == ["good"] and res.rows_read == 3
    assert res.scores == pytest.approx([PREDICATE_WEIGHT])
    unscored = await rank_neighbours(found, 3, query.model_copy(update={"query_vector": None}), index)
    assert [t.p.value for t in unscored.triples] == ["bad", "good"]  # deduped, store order, unscored
    assert unscored.scores == [None, None]


async def test_rank_neighbours_scores_relations_as_path_continuations() -> None:
    parent, born = [1.0, 0.0], [0.0, 1.0]
    q = [0.6, 0.5]
    index = Vectors({"parent": parent, "born": born})
    found = [(_edge("m", "parent", "z"), "m"), (_edge("m", "born", "w"), "m")]
    query = NeighboursQuery(user="u", collection="c", entities=["m"], query_vector=q, max_returned=2)
    alone = await rank_neighbours(found, 2, query, index)
    assert [t.p.value for t in alone.triples] == ["parent", "born"]
    after = await rank_neighbours(found, 2, query.model_copy(update={"paths": {"m": ["parent"]}}), index)
    assert [t.p.value for t in after.triples] == ["born", "parent"]  # the question already used "parent"


@dataclass(frozen=True)
class Hit:
    label: str
    score: float
    lexical: bool = False


def test_entity_hits_named_first_longest_name_first_then_nearest() -> None:
    hits = [Hit("x", 0.9), Hit("curie", 1.0, True), Hit("y", 0.95), Hit("marie curie", 1.0, True)]
    assert [h.label for h in rank_entity_hits(hits, 3)] == ["marie curie", "curie", "y"]
