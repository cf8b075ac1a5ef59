"""A question over a collection that does not exist (a misspelling, the empty `default`) warns,
naming the user's collections, and exits 1 — for one question and for --batch, for graph-rag and
for the document services, which find nothing there and could not tell why before. README's
--batch example asks the collection the README loads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from processors.commands.cli import main

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sample.tsv"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    root = tmp_path_factory.mktemp("unknown")
    args = ["--home", str(root / "home")]
    assert main(["load", "triples", str(SAMPLE), "-C", "demo", "--no-progress", *args]) == 0
    (root / "q.txt").write_text("Where was marie_curie's husband born?\nWho was pierre_curie's spouse?\n")
    return [*args, "--batch", str(root / "q.txt")]


def test_a_batch_over_a_missing_collection_warns_once_and_exits_1(
    home: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["query", "graph-rag", "--json", "--no-llm", *home]) == 1
    out = capsys.readouterr()
    assert out.err.count("collection 'default' is empty or unknown (known collections of user 'default': demo)") == 1
    assert len(out.out.splitlines()) == 2  # the answers are still printed, one per line
    assert main(["query", "graph-rag", "-C", "demo", "--json", "--no-llm", *home]) == 0


@pytest.mark.parametrize("service", ["lazy-rag", "kg-query", "drift"])
def test_document_services_warn_of_a_missing_collection(
    home: list[str], capsys: pytest.CaptureFixture[str], service: str
) -> None:
    args = home[:2]
    assert main(["query", service, "Who was Marie Curie?", "-C", "dmeo", "--no-llm", *args]) == 1
    assert (
        "collection 'dmeo' is empty or unknown (known collections of user 'default': demo)" in capsys.readouterr().err
    )


def test_the_readme_batch_example_names_a_loaded_collection() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    examples = [line for line in readme.splitlines() if re.match(r"\s*kgflow query \S+ --batch", line)]
    assert examples and all(re.search(r"(-C|--collection) demo\b", line) for line in examples), examples
    assert "kgflow load triples examples/sample.tsv --collection demo" in readme
