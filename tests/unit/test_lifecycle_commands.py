"""The lifecycle commands say what happened: deleting a collection or a document that does not
exist is an error naming it (exit 1), and an empty list prints as an empty list with a note."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from processors.commands.cli import main

DOC = '{"id": "d1", "title": "Curie", "text": "Marie Curie discovered polonium in Paris."}\n'


@pytest.fixture
def home(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(DOC, encoding="utf-8")
    args = ["--home", str(tmp_path / "home")]
    assert main(["load", "documents", str(corpus), "-C", "docs", "--no-progress", *args]) == 0
    capsys.readouterr()
    return args


def test_deleting_a_missing_collection_fails_and_names_it(home: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["collections", "delete", "nope", *home]) == 1
    out = capsys.readouterr()
    assert "collection 'nope' not found" in out.err and "docs" in out.err
    assert json.loads(out.out) == {"deleted": 0}
    assert main(["collections", "delete", "docs", *home]) == 0
    assert json.loads(capsys.readouterr().out) == {"deleted": 1}


def test_deleting_missing_documents_fails_and_names_them(home: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["documents", "delete", "d1", "ghost", "-C", "docs", *home]) == 1
    out = capsys.readouterr()
    assert json.loads(out.out) == {"deleted": 1, "not_found": ["ghost"]}
    assert "not found in default/docs: ghost" in out.err
    assert main(["documents", "delete", "d1", "-C", "docs", *home]) == 1  # already gone


def test_empty_lists_print_as_empty_lists(home: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    for command, key in (
        (["documents", "list", "-C", "empty"], "documents"),
        (["communities", "list", "-C", "empty"], "communities"),
        (["collections", "list", "-U", "nobody"], "collections"),
    ):
        assert main([*command, *home]) == 0
        out = capsys.readouterr()
        assert json.loads(out.out) == {key: []}, command
        assert f"no {key}" in out.err
    assert main(["documents", "list", "-C", "docs", *home]) == 0
    assert [d["id"] for d in json.loads(capsys.readouterr().out)["documents"]] == ["d1"]
