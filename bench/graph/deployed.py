"""The deployed path: every call over a real Pulsar broker, and the server stores.

* `bench_over_pulsar`: the same processors and store in-process, in one process over Pulsar and
  deployed (one OS process per processor, `bench.harness.fleet`), alternating on the same questions in the
  same run, so the difference is what the bus costs: per question, per bus round trip (requests
  counted), per stage; throughput at each concurrency in-process and deployed; the classic
  algorithm with every store call a request to the deployed triples service.
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

from bench.graph import graphs, pathquestion
from bench.graph.bus import CountingBus
from bench.graph.common import CONCURRENCY, Config, Dataset, log, sample
from bench.graph.measure import KgflowClient, Run, classic_sample, throughput
from bench.harness.fleet import GRAPH_RAG_FLEET, Fleet, processor_fleet
from bench.harness.servers import server_pids
from bench.harness.stats import percentile
from processors.base.bus import Bus, MemoryBus
from processors.base.settings import RuntimeSettings
from processors.commands.system import System, embedded
from processors.stores.settings import StoreSettings
from schemas.tenant import Tenant

DatasetBench = Callable[[Dataset, Config, StoreSettings], Awaitable[dict[str, Any]]]


async def _one_path(
    ds: Dataset, store: StoreSettings, bus: Bus, questions: list[str], cfg: Config, extra: bool
) -> tuple[Run, float, dict[str, Any]]:
    """kgflow, every processor in this process, on `questions` over `bus`: the run, bus requests per
    question and (with `extra`) throughput at each concurrency."""
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
        finally:
            await kg.stop()
    return run, per_question, more


async def _fleet_path(
    ds: Dataset, store: StoreSettings, url: str, fleet: Fleet, questions: list[str], cfg: Config, extra: bool
) -> tuple[Run, float, dict[str, Any]]:
    """kgflow deployed (one process per processor, `fleet`), asked over Pulsar from this process:
    the run, bus requests per question (the processes' own request counters) and (with `extra`)
    throughput and the classic algorithm with every store call a request to the fleet's triples."""
    from processors.base.pulsar_bus import PulsarBus

    more: dict[str, Any] = {}
    client = System(PulsarBus(url), store, RuntimeSettings())  # the bus, and stores for the classic's seeds
    kg = KgflowClient(client, ds.collection, {"max_path_length": ds.max_path_length})
    try:
        for q in questions[:3]:
            await kg.ask(q)
        before = await fleet.requests_handled()
        run = await kg.run(questions, edge_limit=25, max_subgraph_size=150)
        per_question = (await fleet.requests_handled() - before) / len(questions)
        if extra:
            pids = {**server_pids(), **fleet.pids()}
            more.update(await throughput(kg, questions, CONCURRENCY, cfg.pulsar_throughput_requests, pids))
            n = min(cfg.pulsar_classic, len(questions))
            log(f"[bench] {ds.key}: classic on {n} questions, every store call a request to the deployed triples")
            more["classic"] = await classic_sample(client, ds.collection, questions[:n], ds.max_path_length, True)
    finally:
        await kg.stop()
        await client.stop()
    return run, per_question, more


async def bench_over_pulsar(ds: Dataset, cfg: Config, url: str, store: StoreSettings) -> dict[str, Any]:
    """kgflow in-process, in one process over Pulsar (`kgflow up --pulsar`) and deployed (a process
    per processor, docs/distributed.md) on the same questions, alternating; the classic algorithm
    over the deployed path: what the deployed path adds, per question and per round trip."""
    from processors.base.pulsar_bus import PulsarBus

    qs = ds.questions[: cfg.pulsar_questions]
    runs: dict[str, list[Run]] = {"in_process": [], "one_process": [], "pulsar": []}
    requests: dict[str, list[float]] = {"one_process": [], "pulsar": []}
    extra: dict[str, dict[str, Any]] = {}
    log(f"[bench] {ds.key}: {len(qs)} questions in-process, in one process over Pulsar and deployed over Pulsar, "
        f"{cfg.pulsar_rounds} rounds each")  # fmt: skip
    for r in range(cfg.pulsar_rounds):
        last = r == cfg.pulsar_rounds - 1
        for where in runs:
            if where == "pulsar":  # started per round: its flow registry must not meet one_process's
                async with processor_fleet(store, url) as fleet:
                    run, per_q, more = await _fleet_path(ds, store, url, fleet, qs, cfg, last)
            else:
                bus: Bus = MemoryBus() if where == "in_process" else PulsarBus(url)
                run, per_q, more = await _one_path(ds, store, bus, qs, cfg, last and where == "in_process")
            runs[where].append(run)
            if where in requests:
                requests[where].append(per_q)
            if last:
                extra[where] = more
    return _pulsar_summary(url, runs, {k: statistics.fmean(v) for k, v in requests.items()}, extra)


def _per_trip(pulsar: list[Run], in_process: list[Run], requests: float) -> float:
    """p50 of what the bus adds per round trip: each question over Pulsar against the same question
    in-process in the same round."""
    per_trip = [
        (p - m) / requests for rp, rm in zip(pulsar, in_process, strict=True) for p, m in zip(rp.ms, rm.ms, strict=True)
    ]
    return round(percentile(per_trip, 50), 3)


def _pulsar_summary(
    url: str, runs: dict[str, list[Run]], requests: dict[str, float], extra: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    pul = Run.merged(runs["pulsar"])
    mem = Run.merged(runs["in_process"])
    one = Run.merged(runs["one_process"]).summary()
    main = pul.summary()
    classic = extra["pulsar"]["classic"]
    same = percentile(runs["pulsar"][-1].ms[: classic["queries"]], 50)  # kgflow on the classic's questions
    return {
        "bus": url,
        "topology": "deployed as docs/distributed.md: config and each processor its own OS process "
        f"({', '.join(GRAPH_RAG_FLEET)}), asked over Pulsar from the benchmark's process",
        "questions": len(runs["pulsar"][0].ms),
        "rounds": len(runs["pulsar"]),
        "p50_ms": main["p50_ms"],
        "p95_ms": main["p95_ms"],
        "errors": main["errors"],
        "in_process_p50_ms": mem.summary()["p50_ms"],
        "store_round_trips_per_query": main["store_round_trips_per_query"],
        "store_requests_per_query": main["store_requests_per_query"],
        "stage_store_requests_per_query": main["stage_store_requests_per_query"],
        "bus_round_trips_per_query": round(requests["pulsar"], 2),
        "bus_round_trips_note": "every request a processor handled (its kgflow_requests_total): the client's to "
        "graph-rag, embeddings, entity search, one per hop, label-resolver",
        "overhead_per_bus_round_trip_p50_ms": _per_trip(runs["pulsar"], runs["in_process"], requests["pulsar"]),
        "stage_p50_ms": main["stage_p50_ms"],
        "in_process_stage_p50_ms": mem.summary()["stage_p50_ms"],
        "one_process": {
            "what": "every processor in the benchmark's process on Pulsar (kgflow up --pulsar)",
            "p50_ms": one["p50_ms"],
            "p95_ms": one["p95_ms"],
            "bus_round_trips_per_query": round(requests["one_process"], 2),
            "overhead_per_bus_round_trip_p50_ms": _per_trip(
                runs["one_process"], runs["in_process"], requests["one_process"]
            ),
            "stage_p50_ms": one["stage_p50_ms"],
        },
        "throughput_rps": extra["pulsar"]["throughput_rps"],
        "throughput_cpu_cores": extra["pulsar"]["throughput_cpu_cores"],
        "in_process_throughput_rps": extra["in_process"]["throughput_rps"],
        "in_process_throughput_cpu_cores": extra["in_process"]["throughput_cpu_cores"],
        "classic_questions": classic["queries"],
        "classic_via_pulsar_p50_ms": classic["classic_p50_ms"],
        "classic_store_calls_per_query": classic["classic_store_calls_per_query"],
        "classic_store_requests_per_query": classic["classic_store_requests_per_query"],
        "p50_ms_on_classic_sample": round(same, 2),
        "speedup_p50": round(classic["classic_p50_ms"] / same, 1) if same else None,
    }


def server_settings(name: str, home: Any) -> StoreSettings:
    """Store settings of a server backend, at the port the environment names."""
    from bench.harness.servers import port

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
    from processors.ingest.triples.readers import read_triples
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
            await graphs.load_in_process(settings, coll, read_triples(kb, "tsv"))
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
                await stores.triples.delete_collection(Tenant(graphs.USER, coll))
                await stores.entities.delete_collection(Tenant(graphs.USER, coll))
            await stores.close()
    shutil.rmtree(home, ignore_errors=True)  # only the flow registry lived there
    return out
