"""Ingestion scale-out over Pulsar: tokens a second a worker indexes, one worker against two, and the
bound the local embedding model sets (`ingest` in bench/results.json).

    python -m bench ingest [--corpus PATH]

The documents flow runs as it is deployed: `kgflow run config`, and one process per worker
(`kgflow run embeddings extractor document-load document-store documents community-build
communities`) on the real Pulsar, every store on the real Neo4j. `kgflow load documents` loads the
corpus with one worker, then into a fresh collection with two; each load is timed from the CLI's
start to its last document (the community build it asks for after is timed apart), and the CPU
time of the workers and the CLI is read from /proc. The embedding bound is the local model alone
embedding the same chunks in this process, every core busy. The workers run in a Pulsar tenant of
their own (KGFLOW_PULSAR_TENANT), apart from any other deployment on the broker.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.harness.fleet import KGFLOW, _free_port, checkout_env, die_with_parent, own_tenant
from bench.harness.results import DATASETS, RESULTS, ROOT, write_section
from bench.harness.servers import pulsar_url
from bench.harness.stats import cpu_seconds, load_average
from schemas.documents import Document

CORPUS = DATASETS / "docqa" / "musique_train100_kag" / "corpus.jsonl"
WORKER = ("embeddings", "extractor", "document-load", "document-store", "documents", "community-build", "communities")
BATCH, IN_FLIGHT = 16, 4  # per worker: two requests loading, so neither waits for the other's store
NEO4J_URL = os.environ.get("KGFLOW_NEO4J_URL", "bolt://127.0.0.1:7687")
READY_TIMEOUT_S = 300.0
LOAD_TIMEOUT_S = 3600.0


def log(msg: str) -> None:
    print(f"[ingest-scale] {msg}", file=sys.stderr, flush=True)


def corpus_tokens(path: Path) -> tuple[int, int, int]:
    """(documents, chunks, tokens) as indexing cuts the corpus (the loader's chunker and tokenizer)."""
    from processors.ingest.documents.chunker import ChunkingParams
    from processors.ingest.documents.files import read_documents
    from processors.ingest.documents.pipeline import chunk_document
    from processors.models.embeddings.model import plain_tokenizer

    tok, params = plain_tokenizer(), ChunkingParams()
    docs = [d for d in read_documents([path], "jsonl") if isinstance(d, Document)]
    chunks = [c for d in docs for c in chunk_document(d, tok, params)]
    return len(docs), len(chunks), sum(c.tokens for c in chunks)


async def embedding_bound(path: Path) -> dict[str, Any]:
    """The local model alone embedding the corpus's chunks (what indexing embeds), every core busy."""
    from processors.ingest.documents.chunker import ChunkingParams
    from processors.ingest.documents.files import read_documents
    from processors.ingest.documents.pipeline import chunk_document, embedded_text
    from processors.models.embeddings.model import OnnxMiniLM, plain_tokenizer

    tok, params = plain_tokenizer(), ChunkingParams()
    docs = [d for d in read_documents([path], "jsonl") if isinstance(d, Document)]
    chunks = [c for d in docs for c in chunk_document(d, tok, params)]
    model = OnnxMiniLM.shared()
    await model.embed([embedded_text(c) for c in chunks[:64]])  # sessions built, arenas grown
    started, cpu0 = time.perf_counter(), cpu_seconds()
    for at in range(0, len(chunks), 256):  # the loader's embedding requests
        await model.embed([embedded_text(c) for c in chunks[at : at + 256]])
    wall, cpu = time.perf_counter() - started, cpu_seconds() - cpu0
    tokens = sum(c.tokens for c in chunks)
    return {"tokens_per_s": round(tokens / wall), "cpu_cores": round(cpu / wall, 2),
            "tokens_per_s_per_core": round(tokens / cpu), "chunks": len(chunks)}  # fmt: skip


def _kgflow(*args: str) -> list[str]:
    return [str(KGFLOW), *args]


class Deployment:
    """The registry and the workers, as OS processes on the real Pulsar and Neo4j."""

    def __init__(self, logs: Path, url: str, tenant: str) -> None:
        self.logs, self.url = logs, url
        self.env = {**checkout_env(), "KGFLOW_LOG_LEVEL": "WARNING", "KGFLOW_PULSAR_TENANT": tenant}
        self.procs: list[subprocess.Popen[bytes]] = []
        self.workers: list[subprocess.Popen[bytes]] = []

    def _start(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        with (self.logs / f"{name}.log").open("wb") as out:
            p = subprocess.Popen(_kgflow(*args), cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=self.env,
                                 preexec_fn=die_with_parent)  # fmt: skip
        self.procs.append(p)
        return p

    async def _ready(self, name: str, needle: str, p: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        log_file = self.logs / f"{name}.log"
        while needle not in log_file.read_text(errors="replace"):
            if p.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start: {log_file.read_text(errors='replace')[-2000:]}")
            await asyncio.sleep(0.5)

    def store_args(self) -> list[str]:
        """Every store on Neo4j (the embedded home holds only what the local backends would)."""
        return ["--home", str(self.logs / "home"), "--neo4j-url", NEO4J_URL, "--triples-backend", "neo4j",
                "--vectors-backend", "neo4j", "--documents-backend", "neo4j"]  # fmt: skip

    async def start_registry(self) -> None:
        p = self._start("config", ["run", "config", "--pulsar", self.url, "--home", str(self.logs / "config")])
        await self._ready("config", "kgflow run: config ready", p)
        for cmd in (
            ["put-blueprint", str(ROOT / "flows" / "default.yaml")],
            ["start", "default", "--blueprint", "default"],
        ):
            await asyncio.to_thread(subprocess.run, _kgflow("flow", *cmd, "--pulsar", self.url), cwd=ROOT, env=self.env,
                                    check=True, capture_output=True, timeout=120)  # fmt: skip

    async def add_worker(self) -> None:
        name = f"worker-{len(self.workers) + 1}"
        args = ["run", *WORKER, "--pulsar", self.url, *self.store_args(), "--metrics-port", str(_free_port())]
        p = self._start(name, args)
        await self._ready(name, f"kgflow run: {WORKER[-1]} ready", p)
        self.workers.append(p)
        await asyncio.sleep(5.0)  # its consumers join the flow's subscriptions (config fetched, flow started)

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


async def timed_load(dep: Deployment, corpus: Path, user: str, collection: str) -> dict[str, Any]:
    """One `kgflow load documents` over Pulsar: wall time, indexing time, CPU of workers and CLI."""
    args = ["load", "documents", str(corpus), "-U", user, "-C", collection, "--no-progress", "--pulsar", dep.url,
            "--batch-size", str(BATCH), "--in-flight", str(IN_FLIGHT * len(dep.workers))]  # fmt: skip
    workers_cpu0 = sum(cpu_seconds(p.pid) for p in dep.workers)
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = await asyncio.to_thread(
        subprocess.run, _kgflow(*args), cwd=ROOT, capture_output=True, text=True, timeout=LOAD_TIMEOUT_S, env=dep.env
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"load failed ({done.returncode}): {done.stderr[-2000:]}")
    children1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cli_cpu = (children1.ru_utime + children1.ru_stime) - (children0.ru_utime + children0.ru_stime)
    workers_cpu = sum(cpu_seconds(p.pid) for p in dep.workers) - workers_cpu0
    built = re.search(r"communities rebuilt in ([0-9.]+) s", done.stderr)
    build_s = float(built.group(1)) if built else 0.0
    loaded = re.search(r"loaded (\d+) documents \((\d+) chunks", done.stderr)
    if loaded is None:
        raise RuntimeError(f"no load summary: {done.stderr[-2000:]}")
    return {"wall_s": round(wall, 1), "community_build_s": round(build_s, 1),
            "indexing_s": round(wall - build_s, 1), "documents": int(loaded.group(1)),
            "chunks": int(loaded.group(2)), "kgflow_cpu_s": round(workers_cpu + cli_cpu, 1)}  # fmt: skip


def figures(run: dict[str, Any], tokens: int, instances: int) -> dict[str, Any]:
    """Throughput of one load: per instance, and per CPU-second of the kgflow processes (workers and
    CLI, community build included; Neo4j and Pulsar not counted)."""
    per_s = tokens / run["indexing_s"]
    return {
        **run,
        "instances": instances,
        "tokens_per_s": round(per_s),
        "documents_per_s": round(run["documents"] / run["indexing_s"], 2),
        "tokens_per_s_per_instance": round(per_s / instances),
        "cpu_cores_used": round(run["kgflow_cpu_s"] / run["wall_s"], 2),
        "tokens_per_s_per_core": round(tokens / run["kgflow_cpu_s"]),
    }


def delete_user(user: str) -> None:
    """Remove the benchmark's collections from Neo4j."""
    from neo4j import GraphDatabase

    with GraphDatabase.driver(NEO4J_URL, auth=None) as driver, driver.session() as session:
        session.run(
            "MATCH (n) WHERE n.user = $user CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 5000 ROWS", user=user
        ).consume()


async def measure(corpus: Path) -> dict[str, Any]:
    docs, chunks, tokens = corpus_tokens(corpus)
    log(f"corpus {corpus.name}: {docs} documents, {chunks} chunks, {tokens} tokens")
    bound = await embedding_bound(corpus)
    log(f"embedding bound: {bound}")
    user = f"bench-ingest-{uuid.uuid4().hex[:8]}"
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="kgflow-ingest-") as tmp, own_tenant(f"kgflow-{user}") as tenant:
        dep = Deployment(Path(tmp), pulsar_url(), tenant)
        try:
            await dep.start_registry()
            for n in (1, 2):
                while len(dep.workers) < n:
                    await dep.add_worker()
                run = figures(await timed_load(dep, corpus, user, f"c{n}"), tokens, n)
                log(f"{n} worker(s): {run}")
                runs[f"{n}_instance" + ("s" if n > 1 else "")] = run
        finally:
            dep.stop()
            await asyncio.to_thread(delete_user, user)
    one, two = runs["1_instance"], runs["2_instances"]
    section: dict[str, Any] = {
        "corpus": {"name": corpus.parent.name, "documents": docs, "chunks": chunks, "tokens": tokens},
        "setup": "kgflow run config + one process per worker (kgflow run " + " ".join(WORKER) + ") on Pulsar, "
        f"every store on Neo4j; kgflow load documents --batch-size {BATCH} --in-flight {IN_FLIGHT} per worker",
        "embedding_bound": bound,
        **runs,
        "two_vs_one": round(two["tokens_per_s"] / one["tokens_per_s"], 2),
        "per_core_vs_embedding_bound": {k: round(r["tokens_per_s_per_core"] / bound["tokens_per_s_per_core"], 2)
                                        for k, r in runs.items()},
        "cpu_count": os.cpu_count(),
        "load_average_at_end": load_average(),
        "machine": "2 cores shared with other sessions' tests and benchmarks (see load_average_at_end)",
    }  # fmt: skip
    return section


def main(argv: list[str] | None = None) -> None:
    """Measure ingestion scale-out and write its key."""
    ap = argparse.ArgumentParser(prog="python -m bench ingest", description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--out", type=Path, default=RESULTS)
    a = ap.parse_args(argv)
    load_at_start = load_average()
    write_section(a.out, "ingest", asyncio.run(measure(a.corpus)), load_at_start)
