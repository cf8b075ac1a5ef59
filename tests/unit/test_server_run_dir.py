"""deploy/kgservers: a start clears the run dir, or keeps only its data with KGFLOW_SERVERS_KEEP_DATA."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "deploy"))
from kgservers.neo4j import Neo4j  # noqa: E402


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Neo4j:
    monkeypatch.setenv("KGFLOW_SERVERS_HOME", str(tmp_path))
    s = Neo4j()
    (s.run / "data" / "databases").mkdir(parents=True)
    (s.run / "data" / "databases" / "store").write_text("rows")
    (s.run / "conf").mkdir()
    (s.run / "conf" / "neo4j.conf").write_text("old")
    (s.run / "command.txt").write_text("java")
    return s


def test_a_start_begins_on_an_empty_run_dir(server: Neo4j) -> None:
    server.clear_run(keep_data=False)
    assert list(server.run.iterdir()) == []


def test_keeping_data_keeps_only_the_data(server: Neo4j) -> None:
    server.clear_run(keep_data=True)
    assert [p.name for p in server.run.iterdir()] == ["data"]
    assert (server.run / "data" / "databases" / "store").read_text() == "rows"
    server.write_config()  # the config is written afresh beside the kept data
    assert "pagecache" in (server.run / "conf" / "neo4j.conf").read_text()


def test_keeping_data_on_a_first_start_makes_the_run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGFLOW_SERVERS_HOME", str(tmp_path))
    s = Neo4j()
    s.clear_run(keep_data=True)
    assert s.run.is_dir() and list(s.run.iterdir()) == []
