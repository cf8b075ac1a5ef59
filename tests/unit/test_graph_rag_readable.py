"""graph-rag answers read like the graph: a predicate without an rdfs:label shows its IRI's local
name (not the IRI), and `sources` are the retrieved entities in relevance order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from processors.commands.cli import main

TURTLE = """\
@prefix ex: <http://example.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
ex:marie rdfs:label "Marie Curie" .
ex:pierre rdfs:label "Pierre Curie" .
ex:warsaw rdfs:label "Warsaw" .
ex:paris rdfs:label "Paris" .
ex:zebra rdfs:label "Zebra Institute" .
ex:marie ex:spouse ex:pierre .
ex:marie ex:placeOfBirth ex:warsaw .
ex:pierre ex:placeOfBirth ex:paris .
ex:marie <http://example.org/ontology#worksAt> ex:zebra .
"""


@pytest.fixture
def answer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict:  # type: ignore[type-arg]
    ttl = tmp_path / "curie.ttl"
    ttl.write_text(TURTLE, encoding="utf-8")
    home = ["--home", str(tmp_path / "home")]
    assert main(["load", "triples", str(ttl), "-C", "ttl", "--no-progress", *home]) == 0
    capsys.readouterr()
    assert main(["query", "graph-rag", "Where was Marie Curie born?", "-C", "ttl", "--json", "--no-llm", *home]) == 0
    return json.loads(capsys.readouterr().out)


def test_unlabelled_predicates_show_their_local_name(answer: dict) -> None:  # type: ignore[type-arg]
    predicates = {t["p_id"]: t["p"] for t in answer["triples"]}
    assert predicates["http://example.org/placeOfBirth"] == "placeOfBirth"
    assert predicates["http://example.org/ontology#worksAt"] == "worksAt"
    assert "http://" not in answer["answer"]  # the facts listed in the answer read as labels


def test_sources_are_in_relevance_order(answer: dict) -> None:  # type: ignore[type-arg]
    ranked = sorted(answer["triples"], key=lambda t: -t["score"])
    expected = list(dict.fromkeys(x for t in ranked for x in (t["s_id"], t["o_id"]) if x))
    assert answer["sources"] == expected
    assert answer["sources"] != sorted(answer["sources"])  # this graph's relevance order is not alphabetical
