"""The triples bar counts the triples the summary counts: a TSV field's label triple is read once
per file, not once per line that names the field (examples/sample.tsv: 92 triples, not 184)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from processors.commands.cli import main
from processors.ingest.triples.readers import read_triples

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample.tsv"


def test_a_file_yields_each_label_triple_once(tmp_path: Path) -> None:
    found = list(read_triples(SAMPLE))
    assert len(found) == len(set(found)) == 92
    plain = tmp_path / "plain.jsonl"
    plain.write_text('{"s": "a", "p": "knows", "o": "b"}\n{"s": "a", "p": "knows", "o": "c"}\n', encoding="utf-8")
    assert len(list(read_triples(plain))) == 2 + 4  # two edges; labels of a, knows, b, c


def test_the_bar_ends_at_the_number_of_triples_loaded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["load", "triples", str(SAMPLE), "-C", "bar", "--home", str(tmp_path / "home")]) == 0
    err = capsys.readouterr().err
    totals = {int(m) for m in re.findall(r"storing sample\.tsv: 100%\|[^|]*\| (\d+)/\d+", err)}
    assert totals == {92}, err[-2000:]
    assert "loaded 92 new triples" in err
