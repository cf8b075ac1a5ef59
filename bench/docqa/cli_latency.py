"""lazy-rag's latency as a user of the CLI sees it, on the same home the bench asks in-process.

Issue 38: the bench reported 99-133 ms where ../shared/tools/docqa_eval.py, reading `elapsed_ms`
from `kgflow query lazy-rag --batch --json --no-llm`, reported 5-8x more. The batch kept four
questions in flight in one process, so each question's `elapsed_ms` counted the other three's
turns on the event loop; the bench asked one at a time. So the bench now also asks through the CLI
itself (a child process, as docqa_eval.py does) and reports:

- `batch`: p50/p95 of `stats.elapsed_ms` over the batch, exactly as docqa_eval.py counts them, with
  the batch's wall time per question;
- `one_question`: a single `kgflow query lazy-rag QUESTION --json --no-llm`, the process's start,
  imports and stores included, as a user typing one question waits for it;
- `batch_p50_over_in_process_p50`: the batch's p50 over the in-process client's p50 of the same
  questions in the same run (1.0 when the two measure the same thing).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from bench.harness.results import ROOT
from bench.harness.stats import load_average, percentile

# The `kgflow` console script's body, run by this Python from the repository (the code measured).
KGFLOW = [sys.executable, "-c", "import sys; from processors.commands.cli import run; sys.exit(run())"]
ONE_QUESTION_RUNS = 3  # single-question invocations timed (each a whole process)


async def _kgflow(home: Path, args: list[str], stdin: str = "") -> tuple[str, float]:
    """stdout of `kgflow ARGS` on `home` (`stdin` piped in), and its wall time (ms)."""
    env = dict(os.environ, KGFLOW_HOME=str(home))
    began = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *KGFLOW, *args, cwd=ROOT, env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate(stdin.encode())
    wall = (time.perf_counter() - began) * 1000
    if proc.returncode:
        raise RuntimeError(f"kgflow {' '.join(args[:2])} failed: {err.decode()[-400:]}")
    return out.decode(), wall


def elapsed_of(stdout: str) -> list[float]:
    """`stats.elapsed_ms` of each JSON line of a `--json` answer (docqa_eval.py's reading)."""
    rows = [json.loads(line) for line in stdout.splitlines() if line.strip().startswith("{")]
    return [float(r["stats"]["elapsed_ms"]) for r in rows if (r.get("stats") or {}).get("elapsed_ms") is not None]


def _ms(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(percentile(values, 50), 1), "p95_ms": round(percentile(values, 95), 1)}


async def cli_latency(
    home: Path, questions: list[str], user: str, collection: str, in_process_p50_ms: float | None = None
) -> dict[str, Any]:
    """lazy-rag through `kgflow query` on `home` (see the module docstring)."""
    scope = ["--json", "--no-llm", "--collection", collection, "--user", user]
    load_at_start = load_average()
    lines = "".join(q.replace("\n", " ") + "\n" for q in questions)
    out, wall = await _kgflow(home, ["query", "lazy-rag", "--batch", "/dev/stdin", *scope], lines)
    elapsed = elapsed_of(out)
    if len(elapsed) != len(questions):
        raise RuntimeError(f"{len(elapsed)} answers with stats for {len(questions)} questions")
    batch = {**_ms(elapsed), "wall_ms_per_question": round(wall / len(questions), 1), "questions": len(questions)}
    walls, own = [], []
    for q in questions[:ONE_QUESTION_RUNS]:
        out, wall = await _kgflow(home, ["query", "lazy-rag", q, *scope])
        walls.append(wall)
        own += elapsed_of(out)
    res: dict[str, Any] = {
        "batch": batch,
        "one_question": {
            "wall_p50_ms": round(percentile(walls, 50), 1),
            "elapsed_p50_ms": round(percentile(own, 50), 1),
            "runs": len(walls),
        },  # fmt: skip
        "load_average": {"start": load_at_start, "end": load_average()},
    }
    if in_process_p50_ms:
        res["batch_p50_over_in_process_p50"] = round(batch["p50_ms"] / in_process_p50_ms, 2)
    return res
