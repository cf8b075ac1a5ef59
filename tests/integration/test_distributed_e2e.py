"""End to end, distributed: every processor its own OS process (`kgflow run NAME --pulsar URL`)
on the real Pulsar, with real store backends; the retrieved triples must equal those of the
embedded default (everything in one process, SQLite + local index) on the same questions."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from processors.stores.settings import StoreSettings
from schemas.tenant import Tenant
from tests.integration.pulsar_helpers import BIN, ROOT, Procs, running

DATASET = ROOT.parent / "shared" / "datasets" / "pathquestion"
KB = DATASET / "2H-kb.txt"
QUESTIONS = DATASET / "PQ-2H.txt"
SAMPLE_EVERY, SAMPLE_SIZE = 95, 20
PARAMS = ("--param", "max-subgraph-size=150")
WORKERS = ("embeddings", "graph-embeddings", "triples", "triples-store", "label-resolver", "graph-rag",
           "text-completion")  # fmt: skip

# Backend configurations: (triples backend, vectors backend).
CONFIGS = {
    "cassandra-triples+neo4j-vectors": ("cassandra", "neo4j"),
    "neo4j-both": ("neo4j", "neo4j"),
}

Retrieved = dict[str, frozenset[tuple[str, str, str]]]


def kgflow(*args: str, log: Path, timeout_s: float = 300, extra: str = "") -> str:
    """Run one `kgflow` command to completion; its stdout, or a failure with the stderr tail."""
    with log.open("wb") as err:
        done = subprocess.run(
            [str(BIN / "kgflow"), *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=err,
            stdin=subprocess.DEVNULL,
            timeout=timeout_s,
            check=False,
        )
    if done.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        pytest.fail(f"kgflow {' '.join(args)} exited {done.returncode}\n{tail}\n{extra}")
    return done.stdout.decode()


def retrieved(jsonl: str) -> Retrieved:
    """Question → set of (s_id, p_id, o_id) from `kgflow query graph-rag --json --batch` output."""
    out: Retrieved = {}
    for line in jsonl.splitlines():
        obj = json.loads(line)
        assert obj.get("error") is None, obj
        out[obj["question"]] = frozenset((t["s_id"], t["p_id"], t["o_id"]) for t in obj["triples"])
    return out


@pytest.fixture(scope="module")
def questions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fixed sample of PQ-2H questions, one per line (the CLI reads the text before a TAB)."""
    lines = QUESTIONS.read_text(encoding="utf-8").splitlines()[::SAMPLE_EVERY][:SAMPLE_SIZE]
    path = tmp_path_factory.mktemp("questions") / "sample.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def embedded_answers(tmp_path_factory: pytest.TempPathFactory, questions: Path) -> Retrieved:
    """The embedded default's retrieved triples for the sample (all processors in one process)."""
    work = tmp_path_factory.mktemp("embedded")
    home = ("--home", str(work / "home"), "--collection", "pq2h")
    kgflow("load", "triples", str(KB), "--no-progress", *home, log=work / "load.err")
    out = kgflow(
        "query", "graph-rag", "--batch", str(questions), "--no-llm", "--json", *PARAMS, *home, log=work / "q.err"
    )
    answers = retrieved(out)
    assert len(answers) == SAMPLE_SIZE and any(answers.values())
    return answers


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    """This test's processor processes, killed at its end."""
    with running(tmp_path / "logs") as ps:
        yield ps


def store_args(triples: str, vectors: str, home: Path, servers: Any) -> list[str]:
    """Store options shared by every process of one configuration."""
    return [
        "--home",
        str(home),
        "--triples-backend",
        triples,
        "--vectors-backend",
        vectors,
        "--cassandra-hosts",
        servers.cassandra_host,
        "--cassandra-keyspace",
        "kgflow_e2e",
        "--neo4j-url",
        servers.neo4j_url,
    ]


def flow_started(flow_id: str) -> Any:
    """Predicate on a JSON log line: the processor started serving `flow_id`."""

    def match(line: str) -> bool:
        try:
            rec = json.loads(line)
        except ValueError:
            return False
        return rec.get("msg") == "flow started" and rec.get("flow") == flow_id

    return match


async def drop_collection(settings: StoreSettings, user: str, collection: str) -> None:
    """Delete the test's collection from the configuration's stores."""
    from processors.stores.factory import open_stores

    stores = open_stores(settings)
    try:
        await stores.triples.delete_collection(Tenant(user, collection))
        await stores.entities.delete_collection(Tenant(user, collection))
    finally:
        await stores.close()


@pytest.mark.parametrize("config", list(CONFIGS))
async def test_distributed_processes_match_embedded_default(
    config: str,
    servers: Any,
    procs: Procs,
    tmp_path: Path,
    questions: Path,
    embedded_answers: Retrieved,
) -> None:
    triples_backend, vectors_backend = CONFIGS[config]
    uid = uuid.uuid4().hex[:10]
    collection, flow_id = f"pq2h_{uid}", f"e2e-{uid}"
    stores = store_args(triples_backend, vectors_backend, tmp_path / "home", servers)
    bus = ["--pulsar", servers.pulsar_url]
    logs = tmp_path / "cli"
    logs.mkdir()

    started = time.monotonic()
    stages: dict[str, float] = {}

    def cli(*args: str, name: str) -> str:
        t0 = time.monotonic()
        out = kgflow(*args, *bus, log=logs / f"{name}.err", extra=procs.tails())
        stages[name] = round(time.monotonic() - t0, 1)
        return out

    # Every processor its own OS process; they wait for the config service (get-config retries).
    config_proc = procs.kgflow("config", "run", "config", *bus, *stores)
    workers = [procs.kgflow(name, "run", name, *bus, *stores, "--log-level", "INFO") for name in WORKERS]
    try:
        await config_proc.await_line("config ready", 60, which="err")
        for w in workers:
            await w.await_line(f"{w.name} ready", 150, which="err")
        stages["processors-ready"] = round(time.monotonic() - started, 1)
        cli("flow", "put-blueprint", str(ROOT / "flows" / "graph-rag.yaml"), name="put-blueprint")
        cli("flow", "start", flow_id, "--blueprint", "graph-rag", name="start")
        for w in workers:
            await w.await_line(flow_started(flow_id), 60, which="err")
        # through the flow: its triples-store stores, its embeddings embed the labels
        await asyncio.to_thread(cli, "load", "triples", str(KB), "--collection", collection, "--flow", flow_id,
                                "--no-progress", name="load")  # fmt: skip
        out = cli(
            "query",
            "graph-rag",
            "--batch",
            str(questions),
            "--no-llm",
            "--json",
            "--flow",
            flow_id,
            "--collection",
            collection,
            *PARAMS,
            name="query",
        )
        distributed = retrieved(out)
        cli("flow", "stop", flow_id, name="stop")
    finally:
        settings = StoreSettings(
            home=tmp_path / "home",
            triples_backend=triples_backend,
            vectors_backend=vectors_backend,
            cassandra_hosts=servers.cassandra_host,
            cassandra_port=servers.cassandra_port,
            cassandra_keyspace="kgflow_e2e",
            neo4j_url=servers.neo4j_url,
        )
        await drop_collection(settings, "default", collection)
    assert all(w.popen.poll() is None for w in [config_proc, *workers]), procs.tails()
    assert distributed.keys() == embedded_answers.keys()
    differing = {
        q: (sorted(distributed[q] ^ embedded_answers[q])) for q in distributed if distributed[q] != embedded_answers[q]
    }
    assert not differing, json.dumps(differing, indent=1)[:6000]
    print(
        f"{config}: {sum(map(len, distributed.values()))} triples over {len(distributed)} questions; "
        f"stage seconds {stages}",
        file=sys.stderr,
    )
