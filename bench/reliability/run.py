"""`make bench-reliability`: what an attacker and a heavy tenant do to a running kgflow, as JSON.

    python -m bench reliability [--frames 1000] [--questions 60] [--kills 10]

1. fuzz: `kgflow up` (gateway with a workspace-bound token) gets fuzzed websocket frames (bad
   types, deep nesting, malformed JSON, odd ids, binary, unknown services); reported: frames sent,
   typed errors returned, frames left unanswered, connections lost, server alive afterwards.
2. embeddings: graph-rag latency (p50/p99, timeouts) over the gateway while idle and while maximal
   embeddings requests run back to back; one 1,024 x 1,000-character request (refused);
   the server's RSS before and after.
3. loads: `kgflow load` killed (SIGKILL) at random points; collections left inconsistent, and
   reruns that completed them (bench/reliability/kill_loads.py).
4. documents, on the embedded default and on the distributed stack (Pulsar + Neo4j): document loads
   killed at random points, a decode-stall probe, the malformed-file corpus, RSS over rounds of
   mixed load (bench/reliability/documents.py).
5. during-load: other clients' graph-rag p50/p95 on the embedded `kgflow up` idle and while two
   50,000-character documents are indexed, in one run (bench/reliability/during_load.py).

    python -m bench reliability --sections documents --stacks embedded --doc-kills 10 --rss-rounds 20

Writes bench/reliability.json and prints it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench.harness.results import DATASETS, RELIABILITY, run_meta
from bench.harness.stats import load_average, percentile
from bench.reliability import documents as doc_reliability
from bench.reliability import during_load, kill_loads
from bench.reliability.fuzz import fuzz_frames
from bench.reliability.stack import ADMIN, KGFLOW, PQ2H, TENANT, connect, health, kgflow_up, log, rss_mb

QUESTIONS = DATASETS / "pathquestion" / "PQ-2H.txt"
RESULTS = RELIABILITY
LONG_TEXT = ("graph retrieval answers questions over knowledge graphs with few store round trips " * 13)[:1000]


async def fuzz(url: str, frames: int, sockets: int = 4, seed: int = 12) -> dict[str, Any]:
    """Send fuzzed frames over `sockets` connections; count what comes back."""
    rng = random.Random(seed)
    batches = [fuzz_frames(rng, frames // sockets, prefix=f"s{n}-") for n in range(sockets)]
    totals = {"frames_sent": 0, "typed_errors": 0, "internal_errors": 0, "answers": 0, "unanswered": 0,
              "connections_lost": 0}  # fmt: skip

    async def one(batch: list[tuple[Any, str | bytes]]) -> None:
        async with aiohttp.ClientSession() as session:
            ws = await connect(session, url, TENANT)
            expected = {rid for rid, _ in batch if rid is not None}
            for _, data in batch:
                await (ws.send_bytes(data) if isinstance(data, bytes) else ws.send_str(data))
                totals["frames_sent"] += 1
            done: set[Any] = set()
            deadline = time.monotonic() + 120
            while not expected <= done and time.monotonic() < deadline:
                msg = await ws.receive(timeout=max(0.1, deadline - time.monotonic()))
                if msg.type != aiohttp.WSMsgType.TEXT:
                    totals["connections_lost"] += 1
                    break
                frame = json.loads(msg.data)
                if isinstance(frame.get("error"), dict) and isinstance(frame["error"].get("type"), str):
                    totals["typed_errors"] += 1
                    totals["internal_errors"] += frame["error"]["type"] == "internal-error"  # a fault, not the input
                elif frame.get("complete"):
                    totals["answers"] += 1
                if frame.get("complete") and frame.get("id") is not None:
                    done.add(frame["id"])
            totals["unanswered"] += len(expected - done)
            await ws.close()

    await asyncio.gather(*(one(b) for b in batches))
    return totals


def questions(n: int) -> list[str]:
    """`n` PathQuestion 2H questions."""
    qs = [ln.split("\t", 1)[0].strip() for ln in QUESTIONS.read_text(encoding="utf-8").splitlines()]
    return [q for q in qs if q][:n]


async def ask_all(url: str, qs: list[str], timeout_s: float = 60.0) -> dict[str, Any]:
    """Ask each question in turn over one socket: latency percentiles and timeouts."""
    ms: list[float] = []
    timeouts = errors = 0
    async with aiohttp.ClientSession() as session:
        ws = await connect(session, url, ADMIN)
        for i, q in enumerate(qs):
            request = {"query": q, "collection": "pq2h", "max-path-length": 2}
            began = time.perf_counter()
            await ws.send_json({"id": f"q{i}", "service": "graph-rag", "flow": "default", "request": request})
            try:
                while not (frame := await ws.receive_json(timeout=timeout_s)).get("complete"):
                    pass
            except TimeoutError:
                timeouts += 1
                continue
            if frame.get("error"):
                timeouts += frame["error"].get("type") == "timeout"
                errors += frame["error"].get("type") != "timeout"
                continue
            ms.append((time.perf_counter() - began) * 1000)
        await ws.close()
    return {"questions": len(qs), "p50_ms": round(percentile(ms, 50), 1), "p99_ms": round(percentile(ms, 99), 1),
            "timeouts": timeouts, "errors": errors}  # fmt: skip


async def embed_forever(url: str, stop: asyncio.Event, counts: dict[str, int]) -> None:
    """Maximal embeddings requests (32 texts of ~1,000 characters: the default token budget) back to back."""
    async with aiohttp.ClientSession() as session:
        ws = await connect(session, url, TENANT)
        n = 0
        while not stop.is_set():
            n += 1
            req = {"texts": [f"{n} {LONG_TEXT}"] * 32}
            await ws.send_json({"id": f"e{n}", "service": "embeddings", "flow": "default", "request": req})
            frame = await ws.receive_json(timeout=300)
            key = "ok" if "response" in frame else frame["error"]["type"]
            counts[key] = counts.get(key, 0) + 1
        await ws.close()


async def embeddings_pressure(url: str, pid: int, n_questions: int) -> dict[str, Any]:
    """Graph-rag latency idle, then while maximal embeddings requests run; RSS before and after."""
    qs = questions(n_questions)
    await ask_all(url, qs[:5])  # warm
    rss_before = rss_mb(pid)
    idle = await ask_all(url, qs)
    async with aiohttp.ClientSession() as session:  # the request: 1,024 x 1,000 characters
        ws = await connect(session, url, TENANT)
        began = time.perf_counter()
        await ws.send_json({"id": "big", "service": "embeddings", "flow": "default",
                            "request": {"texts": [LONG_TEXT] * 1024}})  # fmt: skip
        big = await ws.receive_json(timeout=300)
        big_ms = round((time.perf_counter() - began) * 1000, 1)
        await ws.close()
    stop, counts = asyncio.Event(), {}
    pressure = [asyncio.create_task(embed_forever(url, stop, counts)) for _ in range(3)]
    await asyncio.sleep(2.0)
    loaded = await ask_all(url, qs)
    stop.set()
    await asyncio.gather(*pressure, return_exceptions=True)
    rss_after = rss_mb(pid)
    return {
        "idle": idle,
        "under_maximal_embeddings": loaded,
        "embedding_requests": counts,
        "p99_ratio": round(loaded["p99_ms"] / max(idle["p99_ms"], 0.001), 2),
        "issue_request_1024x1000_chars": {"answer": big.get("error", {}).get("type", "ok"), "ms": big_ms},
        "rss_mb_before": rss_before,
        "rss_mb_after": rss_after,
        "rss_growth_mb": round(rss_after - rss_before, 1),
    }


async def main_async(a: argparse.Namespace) -> dict[str, Any]:
    """Every section asked for: one `kgflow up` for fuzz and embeddings, then killed triples loads,
    then the document surface on each stack (bench/reliability/documents.py)."""
    load_at_start = load_average()
    out: dict[str, Any] = {}
    if "triples" in a.sections:
        out.update(await _triples_sections(a))
    if "documents" in a.sections:
        out["documents"] = {}
        for stack in a.stacks.split(","):
            log(f"[reliability] the document surface on the {stack} stack")
            out["documents"][stack] = await doc_reliability.run_stack(stack, a.doc_kills, a.rss_rounds, questions(60))
    if "during-load" in a.sections:
        log("[reliability] graph-rag while two 50,000-character documents are indexed")
        out["during_load"] = await during_load.run(questions(a.questions))
    out["meta"] = run_meta(load_at_start)
    out["targets"] = targets(out)
    return out


def targets(out: dict[str, Any]) -> dict[str, bool]:
    """Every target of the sections that ran."""
    found: dict[str, bool] = {}
    if "embeddings" in out:
        e = out["embeddings"]
        found.update({
            "p99_within_3x_idle": e["p99_ratio"] <= 3.0,
            "no_timeouts": e["under_maximal_embeddings"]["timeouts"] == 0,
            "rss_growth_within_200_mb": e["rss_growth_mb"] <= 200,
            "no_inconsistent_collections": out["loads"]["inconsistent"] == 0,
            "fuzz_no_connection_lost": out["fuzz"]["connections_lost"] == 0 and out["fuzz"]["server_alive"],
            "fuzz_no_internal_errors": out["fuzz"]["internal_errors"] == 0,
        })  # fmt: skip
    for stack, d in out.get("documents", {}).items():
        found.update({f"{stack}_{name}": ok for name, ok in doc_reliability.targets(d).items()})
    if "during_load" in out:
        found.update(during_load.targets(out["during_load"]))
    return found


async def _triples_sections(a: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="kgflow-reliability-") as tmp:
        home = Path(tmp) / "home"
        load = [str(KGFLOW), "load", "triples", str(PQ2H), "--home", str(home), "-C", "pq2h", "--no-progress"]
        await asyncio.to_thread(subprocess.run, load, check=True, capture_output=True)
        async with kgflow_up(home) as (url, pid):
            log(f"[reliability] fuzzing with {a.frames} frames")
            out["fuzz"] = await fuzz(url, a.frames)
            alive = await asyncio.to_thread(health, url)
            out["fuzz"]["server_alive"] = alive and (await ask_all(url, questions(1)))["errors"] == 0
            log(f"[reliability] graph-rag under maximal embeddings ({a.questions} questions)")
            out["embeddings"] = await embeddings_pressure(url, pid, a.questions)
        log(f"[reliability] killing {a.kills} loads")
        out["loads"] = await asyncio.to_thread(kill_loads.run, PQ2H, Path(tmp) / "kills", a.kills)
    return out


def main(argv: list[str] | None = None) -> None:
    """Run, print and save the JSON."""
    ap = argparse.ArgumentParser(prog="python -m bench reliability", description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=1000)
    ap.add_argument("--questions", type=int, default=60)
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--doc-kills", type=int, default=10)
    ap.add_argument("--rss-rounds", type=int, default=20)
    ap.add_argument("--sections", default="triples,documents,during-load", help="triples (fuzz, embeddings, "
                    "killed triples loads), documents and/or during-load (graph-rag while documents are "
                    "indexed)")  # fmt: skip
    ap.add_argument("--stacks", default="embedded,distributed", help="the document surface on these stacks")
    out = asyncio.run(main_async(ap.parse_args(argv)))
    if RESULTS.exists():  # sections and stacks not run this time keep their last figures (and targets)
        last = json.loads(RESULTS.read_text())
        out = {**last, **out, "documents": {**last.get("documents", {}), **out.get("documents", {})},
               "targets": {**last.get("targets", {}), **out["targets"]}}  # fmt: skip
    RESULTS.write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))
