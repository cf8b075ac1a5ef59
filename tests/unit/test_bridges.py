"""Query-side bridge detection (processors/algorithms/bridges): names, their order, the follow-up query."""

from __future__ import annotations

import pytest

from processors.algorithms.bridges import bridges, fuse, names, sentences

JOURNAL = (
    "Journal of Psychotherapy Integration is a quarterly peer-reviewed academic journal published by the "
    "American Psychological Association on behalf of the Society for the Exploration of Psychotherapy Integration. "
    "It was established in 1991. The editor-in-chief is Jerry Gold (Adelphi University)."
)
QUESTION = "Who was the first president of the association which published Journal of Psychotherapy Integration?"


def test_names_are_capitalised_runs_split_at_punctuation_and_conjunctions() -> None:
    found = names("In 1905, Marie Curie and Pierre Curie went to the University of Paris (France) with NASA.")
    assert found == ["Marie Curie", "Pierre Curie", "University of Paris", "France", "NASA"]


def test_a_common_word_opening_a_sentence_is_not_a_name() -> None:
    assert names("The band toured Europe.") == ["Europe"]
    assert names("He met Pei in Paris.") == ["Pei", "Paris"]
    assert names("Abbey Road was recorded by The Beatles.") == ["Abbey Road", "The Beatles"]


def test_sentences_split_at_sentence_ends_only() -> None:
    assert sentences("It opened in 1991. The editor is J.R. Gold, 3.5 m tall! Why?") == [
        "It opened in 1991.",
        "The editor is J.R. Gold, 3.5 m tall!",
        "Why?",
    ]


def test_the_bridge_is_the_name_in_the_sentence_that_matches_the_question() -> None:
    found = bridges(QUESTION, JOURNAL, 3)
    assert found[0].name == "American Psychological Association"
    # The follow-up query asks for what the passage does not hold yet, about the bridge.
    assert found[0].query == "American Psychological Association first president"
    assert all("Journal of Psychotherapy Integration" != b.name for b in found)  # the question says it already


def test_names_the_question_says_are_not_bridges_and_limit_holds() -> None:
    found = bridges("Where was Marie Curie born?", "Marie Curie was born in Warsaw, Poland. She studied in Paris.", 2)
    assert [b.name for b in found] == ["Warsaw", "Poland"]


def test_fuse_adds_each_follow_up_to_the_first_ranking() -> None:
    first = ["a", "b", "c"]
    # b's follow-up finds d first: d joins above c; a follow-up of a lower seed weighs less.
    fused = fuse(first, [(1, ["d", "a"])], k=1.0, weight=1.0, decay=0.6, keep=0)
    assert [c for c, _ in fused] == ["a", "b", "d", "c"]
    assert fused[0][1] == pytest.approx(1 / 2 + 0.6 / 3) and fused[2][1] == pytest.approx(0.6 / 2)
    assert [c for c, _ in fuse(first, [], 1.0, 1.0, 1.0, 0)] == first  # no follow-up: the order stays
    assert [c for c, _ in fuse(first, [(0, ["d"])], 60.0, 0.0, 1.0, 0)] == ["a", "b", "c", "d"]  # weight 0: last


def test_fuse_keeps_the_question_s_best_match_first() -> None:
    # b and c are what a's names lead to: they pass a, which stays first with keep=1.
    follow = [(0, ["c", "b"]), (0, ["c", "b"])]
    assert [c for c, _ in fuse(["a", "b", "c"], follow, 1.0, 1.0, 1.0, keep=0)][0] == "c"
    fused = fuse(["a", "b", "c"], follow, 1.0, 1.0, 1.0, keep=1)
    assert [c for c, _ in fused] == ["a", "c", "b"] and fused[0][1] > fused[1][1] > fused[2][1]
