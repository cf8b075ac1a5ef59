"""graph-rag against the classic baseline: latency, store round trips, coverage and throughput per
backend and path → `graph` in bench/results.json (printed too).

    python -m bench graph [--quick] [--datasets pq3,pq2,1m,10k] [--backends embedded,cassandra,neo4j]

Every figure comes from one run: kgflow through the real processors (in-process bus, no
LLM) and the classic algorithm against the same store. See bench/README.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from bench.graph import graphs, pathquestion
from bench.graph.bus import bench_bus
from bench.graph.common import CONCURRENCY, Config, Dataset, log, sample
from bench.graph.deployed import bench_over_pulsar, bench_server_backend
from bench.graph.measure import (
    KgflowClient,
    classic_sample,
    forget_labels,
    label_cache_workload,
    throughput,
    warm_up,
)
from bench.harness.results import RESULTS, write_section
from bench.harness.servers import pulsar_url, server_pids, servers_for
from bench.harness.stats import load_average, peak_rss_mb, percentile
from bench.harness.targets import targets
from processors.base.settings import RuntimeSettings
from processors.commands.system import embedded
from processors.stores.settings import StoreSettings


async def prepare(keys: list[str], cfg: Config) -> list[Dataset]:
    """Load (or find cached) every requested graph."""
    out: list[Dataset] = []
    for key in keys:
        t = time.perf_counter()
        if key in ("pq3", "pq2"):
            hops = int(key[2])
            home, info = await pathquestion.ensure_loaded(hops, log=log)
            qs = sample(pathquestion.questions(hops), cfg.pq_questions)
            ds = Dataset(
                f"pathquestion-{hops}h", pathquestion.collection(hops), home,
                [q.question for q in qs], [q.answer for q in qs], hops, info,
            )  # fmt: skip
        else:
            size = {"1m": 1_000_000, "100k": 100_000, "10k": 10_000}[key]
            spec = graphs.GraphSpec(f"powerlaw-{key}", size)
            home, info = await graphs.ensure_loaded(spec, log=log)
            qs = graphs.load_questions(home)[: cfg.gen_questions]
            ds = Dataset(spec.name, spec.collection, home, [q.question for q in qs], [q.answer for q in qs], 2, info,
                         graphs.load_questions(home, "hub_questions")[: cfg.gen_questions])  # fmt: skip
        ds.info = {**info, "prepare_s_this_run": round(time.perf_counter() - t, 1)}
        out.append(ds)
    return out


async def bench_dataset(ds: Dataset, cfg: Config, store: StoreSettings) -> dict[str, Any]:
    """Every figure for one graph on one backend."""
    async with embedded(store, RuntimeSettings()) as system:
        kg = KgflowClient(system, ds.collection, {"max_path_length": ds.max_path_length})
        try:
            server = store.triples_backend != "sqlite"
            warm = await warm_up(kg, ds.questions, cfg.server_warmup_s if server else 0.0)
            if server:  # what the warm-up put in the label cache would flatter the timed run
                await forget_labels(system, ds.collection)
                log(f"[bench] {ds.key}: server warmed, {warm['warm_up_questions']} questions in {warm['warm_up_s']} s")
            log(f"[bench] {ds.key}: {len(ds.questions)} kgflow queries (edge-limit 25)")
            main = await kg.run(ds.questions, keep_labels=True, edge_limit=25, max_subgraph_size=150)
            res: dict[str, Any] = {"questions": len(ds.questions), "max_path_length": ds.max_path_length}
            if server:
                res.update(warm)
            res.update(main.summary())
            if ds.answers is not None:
                cov25 = sum(pathquestion.covered(a, t) for a, t in zip(ds.answers, main.labels, strict=True))
                res["answer_coverage_edge_limit_25"] = round(cov25 / len(ds.answers), 4)
                if ds.key.startswith("pathquestion"):
                    log(f"[bench] {ds.key}: coverage run at max-subgraph-size 150 (edge-limit 150)")
                    wide = await kg.run(ds.questions, keep_labels=True, edge_limit=150, max_subgraph_size=150)
                    cov = sum(pathquestion.covered(a, t) for a, t in zip(ds.answers, wide.labels, strict=True))
                    res["answer_coverage"] = round(cov / len(ds.answers), 4)
                    res["answer_coverage_params"] = "max-subgraph-size 150, edge-limit 150, relevance traversal"
                    res["wide_p50_ms"] = wide.summary()["p50_ms"]
                    bfs = await kg.run(ds.questions, keep_labels=True, traversal="bfs", max_subgraph_size=150)
                    cov = sum(pathquestion.covered(a, t) for a, t in zip(ds.answers, bfs.labels, strict=True))
                    res["answer_coverage_bfs"] = round(cov / len(ds.answers), 4)  # plain BFS, same limits
            if ds.hub_questions:
                res.update(await hub_start_quality(kg, ds.hub_questions))
            n_classic = cfg.classic_pq if ds.key.startswith("pathquestion") else cfg.classic_gen
            idx = [int(i * len(ds.questions) / n_classic) for i in range(min(n_classic, len(ds.questions)))]
            log(f"[bench] {ds.key}: classic baseline on {len(idx)} queries")
            classic = await classic_sample(system, ds.collection, [ds.questions[i] for i in idx], ds.max_path_length)
            same = percentile([main.ms[i] for i in idx if i < len(main.ms)], 50)
            same_ex = percentile([main.ms_ex_embed[i] for i in idx if i < len(main.ms_ex_embed)], 50)
            res.update({k: v for k, v in classic.items() if k.startswith("classic_")})
            res["classic_sample"] = f"{len(idx)} of {len(ds.questions)} questions (evenly spaced), sequential"
            res["classic_limits"] = classic["limits"]
            bus = await classic_sample(system, ds.collection, [ds.questions[i] for i in idx], ds.max_path_length, True)
            res["classic_via_bus_p50_ms"] = bus["classic_p50_ms"]
            res["speedup_p50_classic_via_bus"] = round(bus["classic_p50_ms"] / same, 1) if same else None
            res["p50_ms_on_classic_sample"] = round(same, 2)
            res["speedup_p50"] = round(classic["classic_p50_ms"] / same, 1) if same else None
            res["p50_ms_excluding_embed_on_classic_sample"] = round(same_ex, 2)
            cx = classic["classic_p50_ms_excluding_embed"]
            res["speedup_p50_excluding_embed"] = round(cx / same_ex, 1) if same_ex else None
            if res.get("store_round_trips_per_query"):
                res["store_call_ratio"] = round(
                    classic["classic_store_calls_per_query"] / res["store_round_trips_per_query"], 1
                )
            if res.get("store_requests_per_query"):
                res["store_request_ratio"] = round(
                    classic["classic_store_requests_per_query"] / res["store_requests_per_query"], 1
                )
            res.update(await all_seeds(kg, [ds.questions[i] for i in idx], classic["classic_p50_ms"], same))
            log(f"[bench] {ds.key}: throughput at concurrency {CONCURRENCY}")
            res.update(await throughput(kg, ds.questions, CONCURRENCY, cfg.throughput_requests, server_pids()))
            res["throughput_requests_per_level"] = cfg.throughput_requests
            log(f"[bench] {ds.key}: label cache workload")
            res.update(await label_cache_workload(system, kg, ds.questions[: cfg.cache_questions]))
            res["peak_rss_mb"] = peak_rss_mb()
            res["graph"] = ds.info
            return res
        finally:
            await kg.stop()


async def all_seeds(kg: KgflowClient, questions: list[str], classic_ms: float, named_ms: float) -> dict[str, Any]:
    """kgflow on the classic's sample starting from every entity hit, as the classic does (all
    `entity-limit` 50), instead of the entities the question names: batching alone against the
    classic, and what starting from the named entities (pruning) adds."""
    log(f"[bench] kgflow from every entity hit (the classic's seeds) on {len(questions)} queries")
    run = await kg.run(questions, edge_limit=25, max_subgraph_size=150, anchors="all")
    summary = run.summary()
    p50 = summary["p50_ms"]
    return {
        "all_seeds_p50_ms_on_classic_sample": p50,
        "all_seeds_store_round_trips_per_query": summary["store_round_trips_per_query"],
        "all_seeds_store_requests_per_query": summary["store_requests_per_query"],
        "speedup_p50_batching": round(classic_ms / p50, 1) if p50 else None,  # classic seeds, kgflow's reads
        "speedup_p50_pruning": round(p50 / named_ms, 1) if named_ms else None,  # named seeds over all seeds
    }


async def hub_start_quality(kg: KgflowClient, questions: list[graphs.Question]) -> dict[str, Any]:
    """How often the first hop from a hub keeps an edge with the question's first relation
    (hubs have hundreds to thousands of edges; see focus predicates), and the answer coverage."""
    log(f"[bench] {len(questions)} questions starting at hubs")
    run = await kg.run([q.question for q in questions], keep_labels=True, edge_limit=25, max_subgraph_size=150)
    rel = sum(
        any(s == q.path[0] and p == q.relations[0] for s, p, _ in found)
        for q, found in zip(questions, run.labels, strict=True)
    )
    cov = sum(pathquestion.covered(q.answer, found) for q, found in zip(questions, run.labels, strict=True))
    return {
        "hub_start_questions": len(questions),
        "hub_start_relation_recall": round(rel / len(questions), 4),
        "hub_start_answer_coverage": round(cov / len(questions), 4),
        "hub_start_p50_ms": run.summary()["p50_ms"],
    }


async def bench_pulsar(data: list[Dataset], cfg: Config, url: str) -> dict[str, Any]:
    """The bus alone (echo round trips, and the bare client's floor), then each generated graph
    with every request over Pulsar (embedded stores behind the processors)."""
    out: dict[str, Any] = {"bus_round_trip": await bench_bus(url, cfg.bus_rounds, cfg.bus_requests, log)}
    for ds in data:
        if not ds.key.startswith("path"):
            try:
                out[ds.key] = await bench_over_pulsar(ds, cfg, url, StoreSettings(home=ds.home))
            except Exception as e:  # noqa: BLE001 - recorded (e.g. a processor that would not start); the rest runs
                out[ds.key] = f"failed: {type(e).__name__}: {e}"
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    ap = argparse.ArgumentParser(prog="python -m bench graph", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="samples, and a 100k graph instead of 1M")
    ap.add_argument("--datasets", default=None, help="comma list of pq3,pq2,1m,100k,10k")
    ap.add_argument("--backends", default="embedded,cassandra,neo4j,pulsar")
    ap.add_argument("--pq-questions", type=int, default=None, help="PathQuestion questions per set (default all)")
    ap.add_argument("--gen-questions", type=int, default=None, help="questions per generated graph")
    ap.add_argument("--classic-sample", type=int, default=None, help="classic queries per graph")
    ap.add_argument("--throughput-requests", type=int, default=None, help="requests per concurrency level")
    ap.add_argument("--server-questions", type=int, default=None, help="PathQuestion questions on server backends")
    ap.add_argument("--server-warmup-s", type=float, default=None, help="untimed questions first (s)")
    ap.add_argument("--cache-questions", type=int, default=None, help="questions in the label-cache workload")
    ap.add_argument("--out", type=Path, default=RESULTS)
    return ap.parse_args(argv)


async def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmarks, write the results file, return the results."""
    a = parse_args(argv)
    began = time.perf_counter()
    load_at_start = load_average()  # other work on the machine skews latencies
    if a.quick:
        cfg = Config(True, a.pq_questions or 300, 100, 20, 10, 100)
        keys = (a.datasets or "pq3,pq2,100k,10k").split(",")
    else:
        cfg = Config(False, a.pq_questions, 200, 100, 30, 300)
        keys = (a.datasets or "pq3,pq2,1m,10k").split(",")
    cfg.gen_questions = a.gen_questions or cfg.gen_questions
    if a.classic_sample:
        cfg.classic_pq = cfg.classic_gen = a.classic_sample
    cfg.throughput_requests = a.throughput_requests or cfg.throughput_requests
    cfg.cache_questions = a.cache_questions or cfg.cache_questions
    cfg.server_questions = a.server_questions or (50 if a.quick else cfg.server_questions)
    cfg.server_warmup_s = a.server_warmup_s if a.server_warmup_s is not None else cfg.server_warmup_s
    backends = a.backends.split(",")
    data = await prepare(keys, cfg)
    prepared_s = time.perf_counter() - began
    results: dict[str, Any] = {}
    if "embedded" in backends:
        emb: dict[str, Any] = {}
        for ds in data:
            emb[ds.key] = await bench_dataset(ds, cfg, StoreSettings(home=ds.home))
            log(f"[bench] {ds.key}: p50 {emb[ds.key]['p50_ms']} ms, classic {emb[ds.key]['classic_p50_ms']} ms")
        results["embedded"] = emb
    deployed = [b for b in ("pulsar", "cassandra", "neo4j") if b in backends]
    if deployed:
        with servers_for(deployed, log) as srv:
            results["servers"] = {"reused": sorted(srv.ready - set(srv.started)), "started": srv.started,
                                  "start_s": srv.start_s, "failed": srv.failed}  # fmt: skip
            url = pulsar_url() if "pulsar" in srv.ready else None
            if "pulsar" in backends:
                results["pulsar"] = await bench_pulsar(data, cfg, url) if url else f"skipped: {srv.why_not('pulsar')}"
            for name in ("cassandra", "neo4j"):
                if name in backends:
                    why = srv.why_not(name)
                    if why:
                        results[name] = f"skipped: {why}"
                    else:
                        results[name] = await bench_server_backend(name, data, cfg, bench_dataset, url)
    out = {
        "run": {
            "command": "python -m bench graph " + " ".join(argv if argv is not None else sys.argv[1:]),
            "quick": cfg.quick,
            "llm": "none (no_llm=True): retrieval only",
            "prepare_s": round(prepared_s, 1),
            "wall_s": round(time.perf_counter() - began, 1),
            "peak_rss_mb": peak_rss_mb(),
        },
        "graph_rag": results,
        "targets": targets(results),
    }
    write_section(a.out, "graph", out, load_at_start)
    return out
