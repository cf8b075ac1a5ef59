"""`make bench-reliability`: what an attacker and a heavy tenant do to a running kgflow, as JSON.

    python -m bench.reliability [--frames 1000] [--questions 60] [--kills 10]

1. fuzz: `kgflow up` (gateway with a workspace-bound token) gets fuzzed websocket frames (bad
   types, deep nesting, malformed JSON, odd ids, binary, unknown services); reported: frames sent,
   typed errors returned, frames left unanswered, connections lost, server alive afterwards.
2. embeddings: graph-rag latency (p50/p99, timeouts) over the gateway while idle and while maximal
   embeddings requests run back to back; the issue's 1,024 x 1,000-character request (refused now);
   the server's RSS before and after.
3. loads: `kgflow load` killed (SIGKILL) at random points; collections left inconsistent, and
   reruns that completed them (bench/kill_loads.py).
4. documents, on the embedded default and on the distributed stack (Pulsar + Neo4j): document loads
   killed at random points, a decode-stall probe, the malformed-file corpus, RSS over rounds of
   mixed load (bench/doc_reliability.py).

    python -m bench.reliability --sections documents --stacks embedded --doc-kills 10 --rss-rounds 20

Writes bench/reliability.json and prints it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

from bench import doc_reliability, kill_loads
from bench.fuzz import fuzz_frames
from bench.measure import percentile

ROOT = Path(__file__).resolve().parent.parent
KGFLOW = Path(sys.executable).parent / "kgflow"
PQ2H = ROOT.parent / "shared" / "datasets" / "pathquestion" / "2H-kb.txt"
QUESTIONS = ROOT.parent / "shared" / "datasets" / "pathquestion" / "PQ-2H.txt"
RESULTS = Path(__file__).resolve().parent / "reliability.json"
ADMIN, TENANT = "bench-admin", "bench-tenant"
LONG_TEXT = ("graph retrieval answers questions over knowledge graphs with few store round trips " * 13)[:1000]


def log(msg: str) -> None:
    """Progress on stderr (the JSON goes to stdout)."""
    print(msg, file=sys.stderr, flush=True)


def rss_mb(pid: int) -> float:
    """Resident set size of process `pid` (MB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + 180
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/v1/health", timeout=2):
                return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"kgflow up did not start: {log_path.read_text()[-2000:]}") from None
            time.sleep(0.3)


@contextlib.asynccontextmanager
async def kgflow_up(home: Path, extra: list[str] | None = None) -> AsyncIterator[tuple[str, int]]:
    """`kgflow up` over `home` on a free port (tokens: ADMIN, and TENANT bound to workspace `default`);
    `extra`: more arguments (the distributed stack's bus and stores)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tokens = home.parent / "tokens"
    tokens.write_text(f"{ADMIN}\n{TENANT} default\n")
    env = {**os.environ, "KGFLOW_GATEWAY_TOKEN_FILE": str(tokens), "KGFLOW_LOG_LEVEL": "ERROR"}
    env.pop("KGFLOW_GATEWAY_TOKEN", None)
    log_path = home.parent / "up.log"
    with log_path.open("wb") as logfile:
        argv = [str(KGFLOW), "up", "--home", str(home), "--gateway-port", str(port), *(extra or [])]
        for attempt in range(5):  # on a shared Pulsar another session's config service may answer a step
            proc = await asyncio.to_thread(subprocess.Popen, argv, env=env, stdout=logfile, stderr=subprocess.STDOUT)
            try:
                await asyncio.to_thread(_wait_healthy, url := f"http://127.0.0.1:{port}", proc, log_path)
                break
            except RuntimeError as e:
                if not any(m in str(e) for m in ("unknown blueprint", "already running")) or attempt == 4:
                    raise
                log(f"[reliability] kgflow up met another flow registry ({e}); again")
                await asyncio.sleep(10)
        try:
            yield url, proc.pid
        finally:
            proc.terminate()
            try:
                await asyncio.to_thread(proc.wait, 30)
            except subprocess.TimeoutExpired:
                proc.kill()


def health(url: str) -> bool:
    """The gateway answers health with the running flow (an admin token)."""
    req = urllib.request.Request(f"{url}/api/v1/health", headers={"Authorization": f"Bearer {ADMIN}"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read()).get("flows") == ["default"]
    except OSError:
        return False


async def connect(session: aiohttp.ClientSession, url: str, token: str) -> aiohttp.ClientWebSocketResponse:
    """An authenticated gateway socket."""
    ws = await session.ws_connect(url.replace("http", "ws") + "/api/v1/socket", max_msg_size=64 << 20)
    await ws.send_json({"type": "auth", "token": token})
    reply = await ws.receive_json(timeout=30)
    if reply.get("type") != "auth-ok":
        raise RuntimeError(f"auth failed: {reply}")
    return ws


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
    then the document surface on each stack (bench/doc_reliability.py)."""
    out: dict[str, Any] = {"meta": {"load_avg_start": os.getloadavg(), "cpus": os.cpu_count()}}
    if "triples" in a.sections:
        out.update(await _triples_sections(a))
    if "documents" in a.sections:
        out["documents"] = {}
        for stack in a.stacks.split(","):
            log(f"[reliability] the document surface on the {stack} stack")
            out["documents"][stack] = await doc_reliability.run_stack(stack, a.doc_kills, a.rss_rounds, questions(60))
    out["meta"]["load_avg_end"] = os.getloadavg()
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


def main() -> None:
    """Run, print and save the JSON."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=1000)
    ap.add_argument("--questions", type=int, default=60)
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--doc-kills", type=int, default=10)
    ap.add_argument("--rss-rounds", type=int, default=20)
    ap.add_argument("--sections", default="triples,documents", help="triples (fuzz, embeddings, killed triples "
                    "loads) and/or documents")  # fmt: skip
    ap.add_argument("--stacks", default="embedded,distributed", help="the document surface on these stacks")
    out = asyncio.run(main_async(ap.parse_args()))
    if RESULTS.exists():  # sections and stacks not run this time keep their last figures
        last = json.loads(RESULTS.read_text())
        out = {**last, **out, "documents": {**last.get("documents", {}), **out.get("documents", {})}}
        out["targets"] = targets(out)
    RESULTS.write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
