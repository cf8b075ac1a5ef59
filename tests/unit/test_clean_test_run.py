"""A passing run ends without a traceback: a logging handler a test installs (the CLI run in-process
installs one on pytest's captured stream) does not outlive the test, so a record logged after the
run (a driver's reconnect thread once the servers stopped) prints no '--- Logging error ---'."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import atexit
import logging

from processors.base.logs import setup_logging


def test_runs_the_clis_logging_setup():
    setup_logging("WARNING", "text")  # as `kgflow` run in-process does, on this test's captured stream


atexit.register(lambda: logging.getLogger("cassandra.pool").warning("reconnecting after the run"))
"""


def _run_probe(tmp_path: Path, *plugins: str) -> str:
    (tmp_path / "test_probe.py").write_text(PROBE)
    args = [arg for p in plugins for arg in ("-p", p)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, str(tmp_path / "test_probe.py")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def test_a_record_after_the_run_prints_no_logging_error(tmp_path: Path) -> None:
    out = _run_probe(tmp_path, "tests.conftest")
    assert "reconnecting after the run" in out  # the record is still shown, as a plain line
    assert "Logging error" not in out and "Traceback" not in out


def test_without_the_suites_fixtures_the_same_run_prints_one(tmp_path: Path) -> None:
    assert "--- Logging error ---" in _run_probe(tmp_path)  # what the fixture prevents
