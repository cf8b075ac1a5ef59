"""Documents at scale: lazy-rag and kg-query latency, recall, store requests and memory over 10k,
100k and 1M chunks on embedded SQLite and on the real Neo4j → `documents` in bench/results.json.

    python -m bench documents [--sizes 10k,100k,1m] [--backends sqlite,neo4j] [--questions N]
                                    [--budget-s S] [--build-timeout-s S] [--measure-timeout-s S]
                                    [--reuse-corpora] [--sqlite-topology embedded|fleet]
                                    [--out bench/results.json]

Each corpus is built (or found cached) by `python -m bench corpora` and measured by
`python -m bench documents-measure`, each a child process bounded in time and memory: a size today's
ranking cannot answer records what happened and the run goes on. See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.documents.corpus import SIZES
from bench.documents.sources import Sources, prepare_sources
from bench.documents.stores import CACHE, spec_for
from bench.harness.results import RESULTS, ROOT, write_section
from bench.harness.stats import load_average
from bench.harness.targets import documents_scale_targets

WRITES = 3  # one-document writes, each followed by a question
BUILD_TIMEOUT_S = {"1k": 900.0, "10k": 1800.0, "100k": 4 * 3600.0, "1m": 12 * 3600.0}


def log(msg: str) -> None:
    """Progress on stderr."""
    print(msg, file=sys.stderr, flush=True)


def _tree_rss_mb(pid: int) -> float:
    """Resident set of a process and all its descendants (MB)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            status = Path(f"/proc/{p}/status").read_text()
            total += int(next(x for x in status.splitlines() if x.startswith("VmRSS")).split()[1]) / 1024
        except (OSError, StopIteration):
            continue
    return total


def run_bounded(argv: list[str], timeout_s: float, rss_cap_mb: float) -> dict[str, Any]:
    """Run a child (its own process group) until it exits, `timeout_s` passes or its process tree
    holds more than `rss_cap_mb`; how it ended."""
    began = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=ROOT, start_new_session=True)
    peak, why = 0.0, None
    while proc.poll() is None:
        peak = max(peak, _tree_rss_mb(proc.pid))
        if time.perf_counter() - began > timeout_s:
            why = f"stopped after {timeout_s:.0f} s (time limit)"
        elif peak > rss_cap_mb:
            why = f"stopped at {peak:.0f} MB resident (memory limit {rss_cap_mb:.0f} MB)"
        if why:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            break
        time.sleep(1.0)
    return {
        "exit": proc.returncode,
        "stopped": why,
        "s": round(time.perf_counter() - began, 1),
        "peak_tree_rss_mb": round(peak),
    }


def plan(sources: Sources, size: str) -> dict[str, Any]:
    """What a measurement writes (new distractor-like documents, as indexing hands them to the
    writer) and which public documents the corpus holds."""
    from bench.documents.corpus import distractors

    spec = spec_for(size, "sqlite")
    docs = distractors(spec, sources, 9_000_000, WRITES)
    public_ids = [d.document.id for docs_ in sources.public.values() for d in docs_]
    return {"writes": [d.indexed().model_dump(mode="json") for d in docs], "public_ids": public_ids}


BUILD_KEYS = ("chunks", "public_chunks", "distractors", "concepts", "triples", "public_write_s", "distractor_write_s",
              "distractors_per_s", "store_write_chunks_per_s", "distractor_waited_for_generation_s", "build_s",
              "disk_mb", "load_average", "built_at", "resumed_after", "cached", "store_code_current", "keys",
              "cpu_s")  # fmt: skip


def bench_one(backend: str, size: str, a: argparse.Namespace, sources: Sources, tmp: Path) -> dict[str, Any]:
    """Build (or find) and measure one corpus; every figure, or what stopped it."""
    built_json, out_json, plan_json = (tmp / f"{n}-{backend}-{size}.json" for n in ("built", "measured", "plan"))
    common = ["--backend", backend, "--size", size]
    argv = [sys.executable, "-m", "bench", "corpora", *common, "--out", str(built_json), "--cache", str(a.cache)]
    argv += ["--reuse-corpora"] if a.reuse_corpora else []
    argv += ["--subset", str(a.subset)] if a.subset else []
    log(f"[docscale] {backend} {size}: building (or finding) the corpus")
    build = run_bounded(argv, a.build_timeout_s or BUILD_TIMEOUT_S[size], a.rss_cap_mb)
    if build["exit"] != 0 or not built_json.exists():
        why = build["stopped"] or f"failed (exit {build['exit']})"
        progress = built_json.with_suffix(".progress.json")
        done = json.loads(progress.read_text()) if progress.exists() else {}  # a later run resumes from here
        return {"skipped": f"no corpus: the build {why}", "build": {"build_process": build, "progress": done}}
    built = json.loads(built_json.read_text())
    plan_json.write_text(json.dumps(plan(sources, size)))
    argv = [sys.executable, "-m", "bench", "documents-measure", *common, "--built", str(built_json),
            "--plan", str(plan_json), "--out", str(out_json), "--budget-s", str(a.budget_s),
            "--warmup-s", str(a.warmup_s), "--question-timeout-s", str(a.question_timeout_s)]  # fmt: skip
    argv += ["--questions", str(a.questions)] if a.questions else []
    argv += ["--topology", a.sqlite_topology] if backend == "sqlite" else []
    log(f"[docscale] {backend} {size}: measuring")
    run = run_bounded(argv, a.measure_timeout_s, a.rss_cap_mb)
    out = json.loads(out_json.read_text()) if out_json.exists() else {}
    if run["exit"] != 0:
        out["incomplete"] = run["stopped"] or f"the measurement failed (exit {run['exit']}); figures so far kept"
    out["measure_process"] = run
    out["build_s"] = built["build_s"]
    out["build"] = {k: built.get(k) for k in BUILD_KEYS} | {"build_process": build}
    return out


def not_measured(section: dict[str, Any], reason: str) -> None:
    """Mark each benchmark size of each backend that has no figures "not measured", with the
    build time projected from the largest corpus built on that backend (its public write plus its
    distractors at its measured rate): never a figure of a corpus that was not built."""
    for backend in ("sqlite", "neo4j"):
        sizes = section[backend]
        built = [(SIZES[k], v["build"]) for k, v in sizes.items()
                 if isinstance(v, dict) and v.get("build", {}).get("distractors_per_s")]  # fmt: skip
        for size in ("10k", "100k", "1m"):
            if size in sizes and "not_measured" not in sizes[size]:
                continue
            entry: dict[str, Any] = {"not_measured": reason}
            if built:
                n, b = max(built, key=lambda x: x[0])
                distractors = SIZES[size] - b["public_chunks"]
                entry["projected_build_s"] = round(b["public_write_s"] + distractors / b["distractors_per_s"])
                rate = b["distractors_per_s"]
                entry["projected_from"] = f"the {n:,}-chunk build's public write, then {distractors:,} at {rate}/s"
            sizes[size] = entry


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    ap = argparse.ArgumentParser(prog="python -m bench documents", description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10k,100k,1m")
    ap.add_argument("--backends", default="sqlite,neo4j")
    ap.add_argument("--questions", type=int, default=None, help="public questions per size (default all 300)")
    ap.add_argument("--budget-s", type=float, default=900.0, help="time for the timed questions per size")
    ap.add_argument("--warmup-s", type=float, default=30.0, help="untimed questions first")
    ap.add_argument("--question-timeout-s", type=float, default=900.0, help="one question's time limit")
    ap.add_argument("--build-timeout-s", type=float, default=None, help="a build's time limit (default by size)")
    ap.add_argument("--measure-timeout-s", type=float, default=3600.0, help="a measurement's time limit")
    ap.add_argument("--rss-cap-mb", type=float, default=10_000.0, help="a child's process tree is stopped above this")
    ap.add_argument("--reuse-corpora", action="store_true", help="reuse corpora built with other store code")
    ap.add_argument(
        "--sqlite-topology",
        choices=("embedded", "fleet"),
        default="embedded",
        help="SQLite measured as its users run it, every processor in one process (its RSS: that process), "
        "or one process per processor over Pulsar as Neo4j is (its RSS: the documents processor's)",
    )
    ap.add_argument("--cache", type=Path, default=CACHE, help="where sources and SQLite corpora are kept")
    ap.add_argument(
        "--subset",
        type=int,
        default=None,
        help="tests: the public sets' first N questions' paragraphs, N MSFT transcripts",
    )
    ap.add_argument("--out", type=Path, default=RESULTS)
    return ap.parse_args(argv)


async def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Build and measure every backend and size asked for; merge the section into the results."""
    a = parse_args(argv)
    sizes, backends = a.sizes.split(","), a.backends.split(",")
    unknown = [s for s in sizes if s not in SIZES] + [b for b in backends if b not in ("sqlite", "neo4j")]
    if unknown:
        raise SystemExit(f"unknown sizes or backends: {unknown}")
    began = time.perf_counter()
    sources = await prepare_sources(a.cache, a.subset, log)
    command = "python -m bench documents " + " ".join(argv if argv is not None else sys.argv[1:])
    load_at_start = load_average()
    section: dict[str, Any] = {"run": {"command": command}}
    earlier = json.loads(a.out.read_text()).get("documents", {}) if a.out.exists() else {}
    for b in ("sqlite", "neo4j"):  # a run of some backends or sizes keeps the others' figures
        section[b] = {k: v for k, v in earlier.get(b, {}).items() if k not in sizes or b not in backends}
    from bench.harness.servers import servers_for

    needs = {"neo4j": ["neo4j", "pulsar"], "sqlite": ["pulsar"] if a.sqlite_topology == "fleet" else []}
    with (
        servers_for(sorted({s for b in backends for s in needs[b]}), log) as srv,
        tempfile.TemporaryDirectory() as tmp,
    ):
        for backend in backends:
            why = next((w for w in map(srv.why_not, needs[backend]) if w), "")
            for size in sizes:
                section[backend][size] = {"skipped": why} if why else bench_one(backend, size, a, sources, Path(tmp))
                section["targets"] = documents_scale_targets(section)
                section["run"]["wall_s"] = round(time.perf_counter() - began, 1)
                write_section(a.out, "documents", section, load_at_start)  # each size kept as it is measured
    if not a.subset:
        not_measured(section, "not built or measured in the runs so far (see projected_build_s)")
        section["targets"] = documents_scale_targets(section)
        write_section(a.out, "documents", section, load_at_start)
    return section
