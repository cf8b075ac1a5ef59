"""Ingestion scales out over Pulsar: two documents-flow workers (`kgflow run embeddings extractor
document-load document-store ...`, each its own OS process) share one load, one of them is killed
with SIGKILL while it holds work, and the collection on Neo4j is the one a single worker builds:
the same documents, chunks, vectors, mentions, entities, labels, relations and communities, each
stored once."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.harness.fleet import own_tenant
from schemas.topics import TENANT, topic
from tests.conftest import Servers
from tests.integration.neo4j_collection import Collection, delete_users, read_collection, vector_gap
from tests.integration.pulsar_helpers import (
    BIN,
    ROOT,
    Procs,
    consumer_count,
    running,
    topic_stats,
    wait_until,
)

CORPUS = ROOT.parent / "shared" / "datasets" / "docqa" / "musique_train100_kag" / "corpus.jsonl"
DOCS, BATCH, IN_FLIGHT = 120, 8, 4  # 15 requests, 4 at a time: both workers always hold some
WORKER = ("embeddings", "extractor", "document-load", "document-store", "documents", "community-build", "communities")
LOAD_TIMEOUT_S = 900


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Procs]:
    """This test's processes, killed at its end."""
    with running(tmp_path / "logs") as ps:
        yield ps


def tenant_topic(tenant: str, service: str, flow_id: str) -> str:
    """The request topic of `service` in the test's own tenant."""
    return topic(service, flow_id).replace(f"://{TENANT}/", f"://{tenant}/", 1)


async def serving(tenant: str, flow_id: str, workers: int) -> None:
    """Wait until `workers` consumers serve each service of the documents flow."""

    def ready() -> bool:
        return all(consumer_count(tenant_topic(tenant, name, flow_id), name) >= workers for name in WORKER)

    await wait_until(ready, 300, f"{workers} workers serving {flow_id}")


def unacked(tenant: str, flow_id: str, service: str) -> list[int]:
    """Unacknowledged requests each consumer of `service` holds now."""
    sub = topic_stats(tenant_topic(tenant, service, flow_id)).get("subscriptions", {}).get(service, {})
    return [int(c.get("unackedMessages", 0)) for c in sub.get("consumers", [])]


def load(
    flow_id: str, user: str, collection: str, corpus: Path, bus: list[str], log: Path, env: dict[str, str]
) -> subprocess.Popen[bytes]:
    """`kgflow load documents` of the corpus, in the background (stderr to `log`)."""
    args = ["load", "documents", str(corpus), "-U", user, "-C", collection, "--flow", flow_id, "--no-progress"]
    args += ["--batch-size", str(BATCH), "--in-flight", str(IN_FLIGHT), *bus]
    with log.open("wb") as err:
        return subprocess.Popen([str(BIN / "kgflow"), *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err, env=env)


def finished(p: subprocess.Popen[bytes], log: Path, procs: Procs) -> str:
    """Wait for a load; its stderr (the test fails with the processes' logs if it failed)."""
    p.wait(LOAD_TIMEOUT_S)
    err = log.read_text(errors="replace")
    assert p.returncode == 0, f"load exited {p.returncode}\n{err[-3000:]}\n{procs.tails()}"
    return err


def assert_same_collection(one: Collection, two: Collection) -> None:
    """`two` holds what `one` holds: every kind of row, the same number of times, and vectors
    (an entity's vector, where the label is spelt alike: it is the label's)."""
    assert one.duplicates() == {} and two.duplicates() == {}
    assert set(one.labels().values()) == {1} == set(two.labels().values())  # one label each
    for kind in one.rows:  # rows first: a difference names the rows, not only their count
        assert two.rows[kind] == one.rows[kind], f"{kind} differ: {set(two.rows[kind]) ^ set(one.rows[kind])}"
    assert two.counts() == one.counts()
    assert vector_gap(one.chunk_vectors, two.chunk_vectors) < 1e-3
    alike = {e for e, label in one.spelling.items() if two.spelling.get(e) == label}
    assert vector_gap(one.entity_vectors, two.entity_vectors, alike) < 1e-3


async def test_two_workers_share_a_load_and_survive_one_killed(servers: Servers, procs: Procs, tmp_path: Path) -> None:
    uid = uuid.uuid4().hex[:10]
    with own_tenant(f"kgflow-scale-{uid}") as tenant:
        await two_workers_share_a_load(servers, procs, tmp_path, uid, tenant)


async def two_workers_share_a_load(servers: Servers, procs: Procs, tmp_path: Path, uid: str, tenant: str) -> None:
    flow_id, user = f"ingest-{uid}", f"scale-{uid}"
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(CORPUS.read_text(encoding="utf-8").splitlines()[:DOCS]) + "\n", encoding="utf-8")
    env = {**os.environ, "KGFLOW_PULSAR_TENANT": tenant}
    bus = ["--pulsar", servers.pulsar_url]
    stores = ["--home", str(tmp_path / "home"), "--neo4j-url", servers.neo4j_url]
    stores += ["--triples-backend", "neo4j", "--vectors-backend", "neo4j", "--documents-backend", "neo4j"]
    worker_args = ["run", *WORKER, *bus, *stores]
    config = procs.kgflow("config", "run", "config", *bus, "--home", str(tmp_path / "config"), env=env)
    procs.kgflow("worker-1", *worker_args, env=env)
    try:
        await config.await_line("config ready", 120, which="err")
        blueprint = ["put-blueprint", str(ROOT / "flows" / "default.yaml")]
        for cmd in (blueprint, ["start", flow_id, "--blueprint", "default"]):
            done = await asyncio.to_thread(
                subprocess.run, [str(BIN / "kgflow"), "flow", *cmd, *bus], capture_output=True, timeout=120, env=env
            )
            assert done.returncode == 0, done.stderr
        await serving(tenant, flow_id, 1)

        # One worker: the reference collection.
        ref_log = tmp_path / "load-one.err"
        first = await asyncio.to_thread(lambda: load(flow_id, user, "one", corpus, bus, ref_log, env))
        finished(first, ref_log, procs)
        one = await asyncio.to_thread(read_collection, servers.neo4j_url, user, "one")
        assert one.counts()["documents"] == DOCS and one.counts()["communities"] > 0

        # Two workers; the second is killed while both hold load requests.
        second = procs.kgflow("worker-2", *worker_args, env=env)
        await serving(tenant, flow_id, 2)
        two_log = tmp_path / "load-two.err"
        loading = load(flow_id, user, "two", corpus, bus, two_log, env)
        both = lambda: sum(1 for n in unacked(tenant, flow_id, "document-load") if n) == 2  # noqa: E731
        await wait_until(both, 300, "both loading")
        held = unacked(tenant, flow_id, "document-load")
        second.signal(9)
        killed_at = time.monotonic()
        err = await asyncio.to_thread(finished, loading, two_log, procs)
        assert "0 failed" in err, err
        two = await asyncio.to_thread(read_collection, servers.neo4j_url, user, "two")
        print(f"killed holding {held} load requests; the load finished {time.monotonic() - killed_at:.1f}s later")
        assert_same_collection(one, two)
    finally:
        procs.stop_all()
        await asyncio.to_thread(delete_users, servers.neo4j_url, [user])
