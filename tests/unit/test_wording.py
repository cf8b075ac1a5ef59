"""Counts in messages are pluralised by their count."""

from pathlib import Path

import pytest

from processors.algorithms.wording import plural
from processors.commands.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_one_is_singular_and_the_rest_plural() -> None:
    assert plural(1, "document") == "1 document"
    assert plural(0, "document") == "0 documents"
    assert plural(2, "entity") == "2 entities"
    assert plural(3, "day") == "3 days"
    assert plural(1, "follow-up question") == "1 follow-up question"
    assert plural(4, "follow-up question") == "4 follow-up questions"
    assert plural(2, "community", "communities") == "2 communities"
    assert plural(5, "model call") == "5 model calls"


def test_loading_one_document_says_one_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = str(ROOT / "examples" / "documents" / "marie-curie.md")
    assert main(["load", "documents", doc, "-C", "one", "--home", str(tmp_path / "home"), "--no-progress"]) == 0
    assert "loaded 1 document (" in capsys.readouterr().err
