"""Shared fixtures: the real servers (started once per test session) and fresh homes."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from processors.stores.settings import StoreSettings

ROOT = Path(__file__).resolve().parent.parent
SERVERS_PY = ROOT / "deploy" / "servers.py"
SERVER_NAMES = ("pulsar", "cassandra", "neo4j")
DATASETS = ROOT.parent / "shared" / "datasets" / "pathquestion"


@dataclass(frozen=True)
class Servers:
    """Endpoints of the real servers."""

    pulsar_url: str
    cassandra_host: str
    cassandra_port: int
    neo4j_url: str

    def all_on_neo4j(self, home: Path) -> StoreSettings:
        """Store settings with triples, vectors and documents on the real Neo4j (`home` for the rest)."""
        return StoreSettings(home=home, triples_backend="neo4j", vectors_backend="neo4j", documents_backend="neo4j",
                             neo4j_url=self.neo4j_url)  # fmt: skip


def _servers(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SERVERS_PY), *args],
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        check=False,
    )


@pytest.fixture(scope="session")
def servers() -> Iterator[Servers]:
    """Pulsar, Cassandra and Neo4j, started by deploy/servers.py unless already running; at the
    end, those this session started are stopped (never one it found running)."""
    missing = [name for name in SERVER_NAMES if _servers("status", name).returncode != 0]
    if missing:
        started = _servers("start", *missing)
        if started.returncode != 0:
            pytest.fail(f"deploy/servers.py start failed:\n{started.stdout[-6000:]}")
    yield Servers(
        pulsar_url=f"pulsar://127.0.0.1:{os.environ.get('KGFLOW_PULSAR_PORT', '6650')}",
        cassandra_host="127.0.0.1",
        cassandra_port=int(os.environ.get("KGFLOW_CASSANDRA_PORT", "9042")),
        neo4j_url=f"bolt://127.0.0.1:{os.environ.get('KGFLOW_NEO4J_BOLT_PORT', '7687')}",
    )
    if missing:
        _servers("stop", *missing)


@pytest.fixture(autouse=True)
def _root_logging_restored() -> Iterator[None]:
    """The root logger as before each test: a test that runs the CLI in-process installs a handler
    on the stream pytest captured for that test, which is closed after it, and any later record
    (a driver's reconnect thread at the end of the run) then prints '--- Logging error ---'."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A fresh embedded data directory."""
    return tmp_path / "kgflow-home"
