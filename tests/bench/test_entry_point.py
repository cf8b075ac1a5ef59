"""`python -m bench`: one entry point listing every section, each section's own --help, and a
clear refusal of a section that does not exist."""

from __future__ import annotations

import pytest

from bench.__main__ import SECTIONS, main


def test_help_lists_every_section_and_what_make_bench_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(f"  {name} " in out for name in SECTIONS)
    assert "graph, docqa, rerank, ingest, communities, documents in turn" in out


@pytest.mark.parametrize("name", list(SECTIONS))
def test_each_section_has_its_own_help(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main([name, "--help"])
    assert done.value.code == 0
    assert f"python -m bench {name}" in capsys.readouterr().out  # its usage, under its section's name


def test_an_unknown_section_is_refused_with_the_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["grpah"]) == 2
    err = capsys.readouterr().err
    assert "unknown section 'grpah'" in err and "  graph " in err
