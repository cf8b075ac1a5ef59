"""The document surface of `make bench-reliability`, on the embedded default or the
distributed stack (Pulsar + Neo4j: `kgflow up --pulsar`, every store on Neo4j):

- kills: `kgflow load documents` (embedded) or the `kgflow up` fleet serving it (distributed)
  killed with SIGKILL at random points, the load run again; labels, owned concepts and counts
  compared with a clean load, and again after deleting every document;
- decode stall: other clients' graph-rag latency while hostile text loads arrive (a quadratic
  charset, large UTF-16 documents; bench/reliability/probes.py);
- malformed corpus: a load of every kind of bad file; documents neither stored nor named as skipped;
- rss: the gateway process's RSS over rounds of mixed load (bench/reliability/probes.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.harness.results import DATASETS
from bench.reliability.probes import decode_stall, load_over, rss_rounds
from bench.reliability.stack import ADMIN, KGFLOW, PQ2H, kgflow_up, log
from processors.stores.factory import open_stores
from processors.stores.settings import StoreSettings
from schemas.tenant import Tenant
from schemas.terms import RDFS_LABEL

CORPUS = DATASETS / "docqa" / "hotpotqa_dev200_migres" / "corpus.jsonl"
USER = "default"
NEO4J_MENTIONED = (
    "MATCH (c:KgChunk {user: $user, collection: $collection})-[:HAS_ENTITY]->(e) RETURN DISTINCT e.uri AS iri"
)


def corpus(path: Path, n: int) -> Path:
    """The first `n` documents of the HotpotQA corpus as a JSONL file."""
    path.write_text("".join(line for line in CORPUS.read_text(encoding="utf-8").splitlines(True)[:n]), "utf-8")
    return path


def cli(args: list[str], env: dict[str, str], timeout: float = 3600) -> subprocess.CompletedProcess[str]:
    """`kgflow ARGS` to the end."""
    return subprocess.run([str(KGFLOW), *args], capture_output=True, text=True, env=env, timeout=timeout, check=False)


async def _mentioned(settings: StoreSettings, stores: Any, collection: str) -> list[str]:
    if settings.documents_backend == "sqlite":
        with sqlite3.connect(settings.home / "docs.db") as conn:
            sql = "SELECT DISTINCT entity FROM mentions WHERE user = ? AND collection = ?"
            return sorted(r[0] for r in conn.execute(sql, (USER, collection)))
    rows = await stores.documents.conn.read(NEO4J_MENTIONED, {"user": USER, "collection": collection})
    return sorted(r["iri"] for r in rows)


async def collection_state(settings: StoreSettings, collection: str) -> dict[str, Any]:
    """Counts, unlabelled mentioned entities and owned concepts of a collection."""
    stores = open_stores(settings)
    try:
        mentioned = await _mentioned(settings, stores, collection)
        labels = await stores.triples.labels(Tenant(USER, collection), mentioned) if mentioned else {}
        triples = await stores.triples.pattern(Tenant(USER, collection), None, None, None, 10_000_000)
        docs = await stores.documents.documents(Tenant(USER, collection), 100_000)
        state = await stores.triples.load_state(Tenant(USER, collection))
        owned = await stores.documents.claimed(Tenant(USER, collection), mentioned) if mentioned else set()
        return {
            "documents": len(docs),
            "chunks": sum(d.chunks for d in docs),
            "mentioned": len(mentioned),
            "unlabelled": sum(1 for e in mentioned if e not in labels),
            "owned": len(owned),
            "triples": len(triples),
            "label_triples": sum(1 for t in triples if t.p.value == RDFS_LABEL),
            "vectors": (await stores.entities.collections(USER)).get(collection, 0),
            "incomplete": state is not None and not state.complete,
        }
    finally:
        await stores.close()


def _delete_all(collection: str, data: Path, env: dict[str, str], where: list[str]) -> None:
    ids = [json.loads(line)["id"] for line in data.read_text(encoding="utf-8").splitlines() if line.strip()]
    done = cli(["documents", "delete", *ids, "-C", collection, *where], env)
    if done.returncode not in (0, 1):  # 1: some were not stored (a killed load's rerun stores them all)
        raise RuntimeError(f"delete failed: {done.stderr[-2000:]}")


def kills(
    data: Path, settings: StoreSettings, where: list[str], env: dict[str, str], n: int,
    restart: Callable[[], None] | None = None, seed: int = 33,
) -> dict[str, Any]:  # fmt: skip
    """`n` loads of `data` killed at random points (the CLI, or with `restart` the fleet it talks to:
    `restart` kills and restarts it), each run again; compared with a clean load, then every document
    deleted and compared with the clean load's leftovers."""
    rng = random.Random(seed)
    tag = f"{os.getpid()}-{int(time.time())}"
    clean_coll = f"rel-clean-{tag}"
    began = time.monotonic()
    first = cli(["load", "documents", str(data), "-C", clean_coll, "--no-progress", *where], env)
    full_s = time.monotonic() - began
    if first.returncode != 0:
        raise RuntimeError(f"clean load failed: {first.stderr[-2000:]}")
    clean = asyncio.run(collection_state(settings, clean_coll))
    _delete_all(clean_coll, data, env, where)
    clean_left = asyncio.run(collection_state(settings, clean_coll))
    out: dict[str, Any] = {"documents": clean["documents"], "clean_load_s": round(full_s, 1), "clean": clean,
                           "clean_after_delete": clean_left, "runs": []}  # fmt: skip
    for i in range(n):
        coll = f"rel-killed-{tag}-{i}"
        proc = subprocess.Popen([str(KGFLOW), "load", "documents", str(data), "-C", coll, "--no-progress", *where],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        began = time.monotonic()
        if i % 2:  # half the kills land inside a store request, where a write can be cut short
            asyncio.run(_wait_for_write(settings, coll, full_s * 2))
            time.sleep(rng.uniform(0.0, 2.0))
        else:  # the others anywhere in the load
            time.sleep(rng.uniform(0.05, 0.95) * full_s)
        at = time.monotonic() - began
        if restart is not None:
            restart()  # the fleet dies mid-load (the CLI waits, or gives up)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed = asyncio.run(collection_state(settings, coll))
        again = cli(["load", "documents", str(data), "-C", coll, "--no-progress", *where], env)
        after = asyncio.run(collection_state(settings, coll))
        _delete_all(coll, data, env, where)
        left = asyncio.run(collection_state(settings, coll))
        out["runs"].append({"kill_at_s": round(at, 1), "stored_when_killed": killed["documents"], "when_killed": killed,
                            "incomplete_when_killed": killed["incomplete"], "rerun_exit": again.returncode,
                            "after_rerun": after, "after_delete": left})  # fmt: skip
    runs = out["runs"]
    keys = ("documents", "chunks", "mentioned", "owned", "triples", "label_triples", "vectors")
    out["summary"] = {
        "kills": n,
        "killed_mid_load": sum(1 for r in runs if 0 < r["stored_when_killed"] < clean["documents"]),
        "unlabelled_after_rerun": sum(r["after_rerun"]["unlabelled"] for r in runs),
        "unowned_after_rerun": sum(clean["owned"] - r["after_rerun"]["owned"] for r in runs),
        "counts_equal_clean": sum(all(r["after_rerun"][k] == clean[k] for k in keys) for r in runs),
        "after_delete_equal_clean": sum(all(r["after_delete"][k] == clean_left[k] for k in keys) for r in runs),
        "kills_after_writes_began": sum(1 for r in runs if _partial(r["when_killed"], clean)),
        "of_those_marked_incomplete": sum(
            1 for r in runs if _partial(r["when_killed"], clean) and r["incomplete_when_killed"]
        ),
    }
    return out


def _partial(killed: dict[str, Any], clean: dict[str, Any]) -> bool:
    """Something was written, not everything."""
    wrote = killed["documents"] or killed["triples"] or killed["vectors"] or killed["incomplete"]
    return bool(wrote) and killed["documents"] < clean["documents"]


async def _wait_for_write(settings: StoreSettings, collection: str, timeout_s: float) -> None:
    """Until a document write into `collection` is running (it marks the collection incomplete)."""
    stores = open_stores(settings)
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            state = await stores.triples.load_state(Tenant(USER, collection))
            if state is not None and not state.complete:
                return
            await asyncio.sleep(0.05)
    finally:
        await stores.close()


def malformed_corpus(root: Path) -> tuple[list[Path], set[str]]:
    """Every kind of bad input beside good documents; the paths to load and the ids of every document
    they hold (what a load must store or name)."""
    for folder in ("a", "b"):
        (root / folder).mkdir(parents=True)
        (root / folder / "report.md").write_text(f"# Report {folder}\nAcme in {folder}.", encoding="utf-8")
    (root / "a" / "long-title.md").write_text("# " + "Acme " * 1000 + "\nAcme opened in Quito.", encoding="utf-8")
    (root / "a" / "huge.txt").write_text("x" * 300_000, encoding="utf-8")
    (root / "a" / "latin1.txt").write_bytes("Café in Lima".encode("latin-1"))
    (root / "a" / "ok.txt").write_text("Acme sells anvils in Lima.", encoding="utf-8")
    rows = [
        json.dumps({"id": "j1", "text": "Acme was founded in Lima."}).encode(),
        json.dumps({"id": "j1", "text": "A second document with the first one's id."}).encode(),
        b'{"id": "j-latin", "text": "Caf\xe9"}',
        b'{"id": "j-broken", "text": ',
        json.dumps({"id": "j-title", "title": "T" * 3000, "text": "Too long a title."}).encode(),
        json.dumps({"id": "j2", "text": "Acme moved to Quito.", "metadata": {"year": 2024}}).encode(),
    ]
    (root / "rows.jsonl").write_bytes(b"\n".join(rows) + b"\n")
    ids = {"a/report.md", "b/report.md", "long-title.md", "huge.txt", "latin1.txt", "ok.txt", "j1", "j1#2",
           "j-latin", "j-broken", "j-title", "j2"}  # fmt: skip
    return [root / "a", root / "b", root / "rows.jsonl", Path("/dev/zero")], ids


def malformed(root: Path, env: dict[str, str], where: list[str]) -> dict[str, Any]:
    """Load the malformed corpus: every document stored or named as skipped, and the exit status."""
    paths, ids = malformed_corpus(root)
    coll = f"rel-malformed-{os.getpid()}"
    done = cli(["load", "documents", *map(str, paths), "-C", coll, "--no-progress", *where], env, timeout=1800)
    listed = cli(["documents", "list", "-C", coll, *where], env)
    stored = (
        {d["id"] for d in json.loads(listed.stdout or "{}").get("documents", [])} if listed.returncode == 0 else set()
    )
    skipped_lines = [ln for ln in done.stderr.splitlines() if ln.startswith("kgflow: skipped")]
    failed_lines = [ln for ln in done.stderr.splitlines() if " failed: " in ln and ln.startswith("kgflow: document")]
    reported = len(skipped_lines) + len(failed_lines)
    return {
        "inputs": len(ids),  # documents (or would-be documents) in the corpus, /dev/zero aside
        "stored": len(stored),
        "named_as_skipped_or_failed": reported,
        "silently_dropped": len(ids)
        - len(stored)
        - reported
        + (1 if any("/dev/zero" in ln for ln in skipped_lines) else 0),
        "exit_status": done.returncode,
        "tracebacks": done.stderr.count("Traceback"),
        "stored_ids": sorted(stored),
        "skipped": skipped_lines + failed_lines,
    }


def stack_settings(stack: str, home: Path) -> tuple[StoreSettings, list[str], list[str]]:
    """The stack's store settings, the store arguments of every `kgflow` command, and the bus arguments
    of those that reach running processors (`load documents`, `documents`)."""
    if stack == "embedded":
        return StoreSettings(home=home), ["--home", str(home)], []
    pulsar = f"pulsar://127.0.0.1:{os.environ.get('KGFLOW_PULSAR_PORT', '6650')}"
    neo4j = f"bolt://127.0.0.1:{os.environ.get('KGFLOW_NEO4J_BOLT_PORT', '7687')}"
    stores = ["--home", str(home), "--neo4j-url", neo4j]
    stores += [f"--{kind}-backend=neo4j" for kind in ("triples", "vectors", "documents")]
    settings = StoreSettings(home=home, triples_backend="neo4j", vectors_backend="neo4j", documents_backend="neo4j",
                             neo4j_url=neo4j)  # fmt: skip
    return settings, stores, ["--pulsar", pulsar]


def targets(d: dict[str, Any]) -> dict[str, bool]:
    """The targets of one stack's document figures: killed loads repaired, a short decode stall, no
    malformed file silently dropped, flat memory."""
    k = d["kills"]["summary"]
    return {
        "killed_loads_repaired": k["unlabelled_after_rerun"] == 0 and k["unowned_after_rerun"] == 0
        and k["counts_equal_clean"] == k["kills"] and k["after_delete_equal_clean"] == k["kills"],
        "decode_stall_p95_within_1s": d["decode_stall"]["p95_within_1s"],
        "malformed_none_silently_dropped": d["malformed"]["silently_dropped"] == 0,
        "rss_flat_within_5pct": d["rss"]["flat_within_5pct"],
    }  # fmt: skip


async def run_stack(stack: str, kill_count: int, rss_count: int, questions: list[str]) -> dict[str, Any]:
    """Every document probe on one stack (`embedded` or `distributed`)."""

    out: dict[str, Any] = {"load_avg_start": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix=f"kgflow-docrel-{stack}-") as tmp:
        home = Path(tmp) / "home"
        settings, stores, bus = stack_settings(stack, home)
        env = {**os.environ, "KGFLOW_LOG_LEVEL": "ERROR"}
        tag = f"{os.getpid()}"
        graph, docs = f"rel-pq2h-{tag}", f"rel-pq2h-{tag}-docs"
        loaded = cli(["load", "triples", str(PQ2H), "-C", graph, "--no-progress", *stores], env)
        if loaded.returncode != 0:
            raise RuntimeError(f"triples load failed: {loaded.stderr[-2000:]}")
        up_args = [*stores[2:], *bus]  # `kgflow up` gets --home itself
        small = corpus(Path(tmp) / "small.jsonl", 10)
        async with kgflow_up(home, up_args) as (url, pid):
            log(f"[reliability] {stack}: decode stall")
            out["decode_stall"] = await decode_stall(url, ADMIN, graph, questions)
            log(f"[reliability] {stack}: rss over {rss_count} rounds")
            await load_over(url, ADMIN, docs, small)
            out["rss"] = await rss_rounds(url, pid, ADMIN, graph, questions, rss_count)
            where = [*stores, *bus]  # embedded: the CLI runs its own processors on the same files
            log(f"[reliability] {stack}: malformed corpus")
            out["malformed"] = await asyncio.to_thread(malformed, Path(tmp) / "malformed", env, where)
        log(f"[reliability] {stack}: {kill_count} killed document loads")
        data = corpus(Path(tmp) / "kills.jsonl", 70)  # two request batches
        if stack == "embedded":
            out["kills"] = await asyncio.to_thread(kills, data, settings, where, env, kill_count)
        else:
            out["kills"] = await _fleet_kills(home, up_args, data, settings, where, env, kill_count)
        await _drop_collections(settings, tag)
    out["load_avg_end"] = os.getloadavg()
    return out


async def _fleet_kills(home: Path, up_args: list[str], data: Path, settings: StoreSettings, where: list[str],
                       env: dict[str, str], n: int) -> dict[str, Any]:  # fmt: skip
    """Distributed: the processors run in `kgflow up --pulsar`; each kill is SIGKILL of that fleet
    mid-load (and of the CLI waiting on it), then a fresh fleet and the load run again."""

    stack = contextlib.AsyncExitStack()
    await stack.enter_async_context(kgflow_up(home, up_args))

    def restart() -> None:
        for pid in _fleet_pids(home):
            os.kill(pid, signal.SIGKILL)
        asyncio.run_coroutine_threadsafe(_reopen(stack, home, up_args), loop).result()

    loop = asyncio.get_running_loop()
    try:
        return await asyncio.to_thread(kills, data, settings, where, env, n, restart)
    finally:
        await stack.aclose()


async def _reopen(stack: contextlib.AsyncExitStack, home: Path, up_args: list[str]) -> None:

    await stack.enter_async_context(kgflow_up(home, up_args))


def _fleet_pids(home: Path) -> list[int]:
    """The running `kgflow up` processes over `home` (this benchmark's own)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if proc.name.isdigit() and b"up" in argv and str(home).encode() in argv:
            found.append(int(proc.name))
    return found


async def _drop_collections(settings: StoreSettings, tag: str) -> None:
    """Remove every collection this run made (the distributed stores are shared servers)."""
    stores = open_stores(settings)
    try:
        names = set(await stores.triples.collections(USER)) | set(await stores.documents.counts(USER))
        names |= set(await stores.entities.collections(USER))
        for name in sorted(n for n in names if tag in n):
            await stores.documents.delete_collection(Tenant(USER, name))
            await stores.communities.delete_collection(Tenant(USER, name))
            await stores.triples.delete_collection(Tenant(USER, name))
            await stores.entities.delete_collection(Tenant(USER, name))
    finally:
        await stores.close()
