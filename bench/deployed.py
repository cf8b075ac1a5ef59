"""The deployed path: every call over a real Pulsar broker, and the server stores.

* `bench_over_pulsar`: the same processors and store, in-process and over Pulsar, alternating on
  the same questions in the same run, so the difference is what the bus costs: per question,
  per bus round trip (requests counted on the bus), per stage; throughput at each concurrency on
  both paths; the classic algorithm with every store call a request over the same broker.
* `bench_server_backend`: PathQuestion loaded into Cassandra or Neo4j (fresh collection, dropped
  after), every figure of the embedded benchmark, plus the same questions over Pulsar.
"""

from __future__ import annotations

import contextlib
import shutil
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from bench import graphs, pathquestion
from bench.bus import CountingBus
from bench.common import CONCURRENCY, Config, Dataset, log, sample
from bench.measure import KgflowClient, Run, classic_sample, percentile, throughput
from bench.servers import server_pids
from processors.base.bus import Bus, MemoryBus
from processors.base.runtime import embedded
from processors.base.settings import RuntimeSettings, StoreSettings

DatasetBench = Callable[[Dataset, Config, StoreSettings], Awaitable[dict[str, Any]]]


async def _one_path(
    ds: Dataset, store: StoreSettings, bus: Bus, questions: list[str], cfg: Config, extra: bool
) -> tuple[Run, float, dict[str, Any]]:
    """kgflow on `questions` over `bus`: the run, bus requests per question and (with `extra`)
    throughput at each concurrency and the classic baseline through the same bus."""
    counting = CountingBus(bus)
    more: dict[str, Any] = {}
    async with embedded(store, RuntimeSettings(), bus=counting) as system:
        kg = KgflowClient(system, ds.collection, {"max_path_length": ds.max_path_length})
        try:
            for q in questions[:3]:  # warm: model, caches, producers and consumers
                await kg.ask(q)
            counting.requests = 0
            run = await kg.run(questions, edge_limit=25, max_subgraph_size=150)
            per_question = counting.requests / len(questions)
            if extra:
                more.update(await throughput(kg, questions, CONCURRENCY, cfg.pulsar_throughput_requests, server_pids()))
                if isinstance(bus, MemoryBus):
                    return run, per_question, more
                n = min(cfg.pulsar_classic, len(questions))
                log(f"[bench] {ds.key}: classic on {n} questions, every store call a request over the same bus")
                more["classic"] = await classic_sample(system, ds.collection, questions[:n], ds.max_path_length, True)
        finally:
            await kg.stop()
    return run, per_question, more


async def bench_over_pulsar(ds: Dataset, cfg: Config, url: str, store: StoreSettings) -> dict[str, Any]:
    """kgflow in-process and over Pulsar on the same questions (alternating), and the classic
    algorithm over Pulsar: what the deployed path adds, per question and per round trip."""
    from processors.base.pulsar_bus import PulsarBus

    qs = ds.questions[: cfg.pulsar_questions]
    runs: dict[str, list[Run]] = {"in_process": [], "pulsar": []}
    requests: list[float] = []
    extra: dict[str, dict[str, Any]] = {}
    log(f"[bench] {ds.key}: {len(qs)} questions in-process and over Pulsar, {cfg.pulsar_rounds} rounds each")
    for r in range(cfg.pulsar_rounds):
        last = r == cfg.pulsar_rounds - 1
        for where in ("in_process", "pulsar"):
            bus: Bus = MemoryBus() if where == "in_process" else PulsarBus(url)
            run, per_q, more = await _one_path(ds, store, bus, qs, cfg, last)
            runs[where].append(run)
            if where == "pulsar":
                requests.append(per_q)
            if last:
                extra[where] = more
    return _pulsar_summary(url, runs, statistics.fmean(requests), extra)


def _pulsar_summary(
    url: str, runs: dict[str, list[Run]], requests: float, extra: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    pul = Run.merged(runs["pulsar"])
    mem = Run.merged(runs["in_process"])
    # per question, paired with the same question in-process in the same round
    per_trip = [
        (p - m) / requests
        for rp, rm in zip(runs["pulsar"], runs["in_process"], strict=True)
        for p, m in zip(rp.ms, rm.ms, strict=True)
    ]
    main = pul.summary()
    classic = extra["pulsar"]["classic"]
    same = percentile(runs["pulsar"][-1].ms[: classic["queries"]], 50)  # kgflow on the classic's questions
    return {
        "bus": url,
        "questions": len(runs["pulsar"][0].ms),
        "rounds": len(runs["pulsar"]),
        "p50_ms": main["p50_ms"],
        "p95_ms": main["p95_ms"],
        "errors": main["errors"],
        "in_process_p50_ms": mem.summary()["p50_ms"],
        "store_round_trips_per_query": main["store_round_trips_per_query"],
        "bus_round_trips_per_query": round(requests, 2),
        "bus_round_trips_note": "every request on the bus: the client's to graph-rag, embeddings, entity search, "
        "one per hop, label-resolver (and its store lookup on cache misses)",
        "overhead_per_bus_round_trip_p50_ms": round(percentile(per_trip, 50), 3),
        "stage_p50_ms": main["stage_p50_ms"],
        "in_process_stage_p50_ms": mem.summary()["stage_p50_ms"],
        "throughput_rps": extra["pulsar"]["throughput_rps"],
        "throughput_cpu_cores": extra["pulsar"]["throughput_cpu_cores"],
        "in_process_throughput_rps": extra["in_process"]["throughput_rps"],
        "in_process_throughput_cpu_cores": extra["in_process"]["throughput_cpu_cores"],
        "classic_questions": classic["queries"],
        "classic_via_pulsar_p50_ms": classic["classic_p50_ms"],
        "classic_store_calls_per_query": classic["classic_store_calls_per_query"],
        "p50_ms_on_classic_sample": round(same, 2),
        "speedup_p50": round(classic["classic_p50_ms"] / same, 1) if same else None,
    }


def server_settings(name: str, home: Any) -> StoreSettings:
    """Store settings of a server backend, at the port the environment names."""
    from bench.servers import port

    return StoreSettings(
        home=home,
        triples_backend=name,  # type: ignore[arg-type]
        vectors_backend=name,  # type: ignore[arg-type]
        cassandra_port=port("cassandra"),
        neo4j_url=f"bolt://127.0.0.1:{port('neo4j')}",
        cassandra_keyspace="kgflow_bench",  # collections are unique per run and dropped after
    )


async def bench_server_backend(
    name: str, datasets: list[Dataset], cfg: Config, bench_dataset: DatasetBench, pulsar: str | None
) -> dict[str, Any] | str:
    """PathQuestion on a server backend (loaded fresh into a unique collection, dropped after):
    the embedded benchmark's figures on the in-process bus, then PQ-3H over Pulsar (`pulsar`)."""
    from processors.ingest.triples_loader import load_triples, read_triples
    from processors.models.embeddings.model import OnnxMiniLM
    from processors.stores.factory import open_stores

    home = graphs.CACHE_DIR / f"{name}-home-{uuid.uuid4().hex[:8]}"
    settings = server_settings(name, home)
    out: dict[str, Any] = {
        "note": f"PathQuestion only, {cfg.server_questions} evenly spaced questions per set; no generated graphs"
    }
    for ds in datasets:
        if not ds.key.startswith("pathquestion"):
            out[ds.key] = f"skipped: only PathQuestion is loaded into {name}"
            continue
        coll = f"{ds.collection}-{uuid.uuid4().hex[:6]}"
        stores = open_stores(settings)
        t = time.perf_counter()
        try:
            kb = pathquestion.DATASETS / f"{ds.max_path_length}H-kb.txt"
            await load_triples(stores, OnnxMiniLM.shared(), graphs.USER, coll, read_triples(kb, "tsv"))
            n = cfg.server_questions
            sub = Dataset(ds.key, coll, home, sample(ds.questions, n), sample(ds.answers or [], n) or None,
                          ds.max_path_length, {"load_s": round(time.perf_counter() - t, 1)})  # fmt: skip
            res = await bench_dataset(sub, cfg, settings)
            if pulsar and ds.max_path_length == 3:
                log(f"[bench] {name} {ds.key}: over Pulsar")
                res["over_pulsar"] = await bench_over_pulsar(sub, cfg, pulsar, settings)
            out[ds.key] = res
        except Exception as e:  # noqa: BLE001 - a failing backend is recorded, the others still run
            out[ds.key] = f"failed: {type(e).__name__}: {e}"
        finally:
            with contextlib.suppress(Exception):
                await stores.triples.delete_collection(graphs.USER, coll)
                await stores.entities.delete_collection(graphs.USER, coll)
            await stores.close()
    shutil.rmtree(home, ignore_errors=True)  # only the flow registry lived there
    return out
