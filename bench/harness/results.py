"""Where the bench keeps what it measured: bench/results.json (tracked by git), one key per section
(named as the section), each written with `meta.<section>`: the commit measured and the machine's load."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.harness.stats import load_average

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
RESULTS = BENCH / "results.json"
RELIABILITY = BENCH / "reliability.json"
CACHE = BENCH / ".cache"
DATASETS = ROOT.parent / "shared" / "datasets"  # the team's data sets, beside the checkout


def commit() -> str:
    """The checkout's commit, with `-dirty` when files differ from it ("unknown" outside git)."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    if head.returncode != 0:
        return "unknown"
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def run_meta(load_at_start: list[float]) -> dict[str, Any]:
    """What a figure needs beside it to be read: the code measured, when, and how busy the machine was."""
    return {
        "commit": commit(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cpus": os.cpu_count(),
        "load_average_at_start": load_at_start,
        "load_average_at_end": load_average(),
        "python": platform.python_version(),
    }


def write_section(path: Path, key: str, section: dict[str, Any], load_at_start: list[float]) -> None:
    """Replace the section's key in the results file (other sections kept) and its run's `meta.<key>`;
    print the section."""
    results = json.loads(path.read_text()) if path.exists() else {}
    results[key] = section
    results.setdefault("meta", {})[key] = run_meta(load_at_start)
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(section, indent=2))
