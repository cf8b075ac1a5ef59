"""Measurements of one loaded graph: kgflow through the real processors (in-process bus, no LLM)
and the classic baseline against the same store, side by side in the same run."""

from __future__ import annotations

import asyncio
import os
import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.graph.classic import BusPatterns, ClassicLimits, ClassicResult, classic_retrieve
from bench.graph.graphs import USER
from bench.harness.stats import cpu_seconds, percentile
from processors.accounting.usage import counting
from processors.base.client import RemoteError, RequestResponseClient, RequestTimeout
from processors.commands.system import System
from processors.models.embeddings.model import OnnxMiniLM
from schemas.flows import GraphChanged
from schemas.graph_rag import GraphRagRequest, GraphRagResponse
from schemas.topics import GRAPH_CHANGED, topic
from schemas.triples import TriplesResponse


def _mean(values: Sequence[int]) -> float | None:
    """The mean, to two places (None for none)."""
    return round(statistics.fmean(values), 2) if values else None


@dataclass
class Run:
    """Per-request figures of a batch of kgflow queries."""

    ms: list[float] = field(default_factory=list)
    ms_ex_embed: list[float] = field(default_factory=list)  # minus the question-embedding stage
    round_trips: list[int] = field(default_factory=list)
    store_requests: list[int] = field(default_factory=list)
    rows_read: list[int] = field(default_factory=list)
    triples: list[int] = field(default_factory=list)
    hits: int = 0
    misses: int = 0
    errors: list[str] = field(default_factory=list)
    stage_ms: dict[str, list[float]] = field(default_factory=dict)
    stage_round_trips: dict[str, list[int]] = field(default_factory=dict)
    stage_requests: dict[str, list[int]] = field(default_factory=dict)
    per_trip_ms: list[float] = field(default_factory=list)  # store stages (all but embed) / store round trips
    labels: list[list[tuple[str, str, str]]] = field(default_factory=list)

    @classmethod
    def merged(cls, runs: Sequence[Run]) -> Run:
        """One run holding every request of `runs`."""
        out = cls()
        for r in runs:
            for name in ("ms", "ms_ex_embed", "round_trips", "store_requests", "rows_read", "triples", "errors",
                         "per_trip_ms", "labels"):  # fmt: skip
                getattr(out, name).extend(getattr(r, name))
            out.hits += r.hits
            out.misses += r.misses
            for mine, theirs in ((out.stage_ms, r.stage_ms), (out.stage_round_trips, r.stage_round_trips),
                                 (out.stage_requests, r.stage_requests)):  # fmt: skip
                for k, v in theirs.items():
                    mine.setdefault(k, []).extend(v)  # type: ignore[arg-type]
        return out

    def summary(self) -> dict[str, Any]:
        """p50/p95 latency, round trips, per-stage medians."""
        return {
            "queries": len(self.ms),
            "errors": len(self.errors),
            "p50_ms": round(percentile(self.ms, 50), 2),
            "p95_ms": round(percentile(self.ms, 95), 2),
            "p50_ms_excluding_embed": round(percentile(self.ms_ex_embed, 50), 2),
            "store_round_trips_per_query": _mean(self.round_trips),
            "store_round_trips_max": max(self.round_trips, default=None),
            "store_requests_per_query": _mean(self.store_requests),
            "store_requests_max": max(self.store_requests, default=None),
            "stage_store_round_trips_per_query": {k: _mean(v) for k, v in self.stage_round_trips.items()},
            "stage_store_requests_per_query": {k: _mean(v) for k, v in self.stage_requests.items()},
            "rows_read_per_query": round(statistics.fmean(self.rows_read), 1) if self.rows_read else None,
            "triples_per_query": round(statistics.fmean(self.triples), 1) if self.triples else None,
            "stage_p50_ms": {k: round(percentile(v, 50), 2) for k, v in self.stage_ms.items()},
            "store_ms_per_round_trip_p50": round(percentile(self.per_trip_ms, 50), 2),
        }


class KgflowClient:
    """Graph-rag requests to flow `default` of an embedded system, the way the CLI sends them."""

    def __init__(self, system: System, collection: str, params: dict[str, Any] | None = None) -> None:
        self.client = RequestResponseClient(
            system.bus, topic("graph-rag", "default"), topic("graph-rag", "default", "response"), GraphRagResponse, 600
        )
        self.collection = collection
        self.params = params or {}

    async def ask(self, question: str, **params: Any) -> tuple[GraphRagResponse, float]:
        """One no-LLM request; the response and its client-side latency (ms)."""
        req = GraphRagRequest(
            query=question, user=USER, collection=self.collection, no_llm=True, **{**self.params, **params}
        )
        t = time.perf_counter()
        res = await self.client.request(req)
        return res, (time.perf_counter() - t) * 1000

    async def run(
        self, questions: Sequence[str], concurrency: int = 1, keep_labels: bool = False, **params: Any
    ) -> Run:
        """Ask every question (at most `concurrency` in flight) and collect the figures."""
        out = Run()
        slots = asyncio.Semaphore(concurrency)
        results: list[tuple[GraphRagResponse, float] | str] = [""] * len(questions)

        async def one(i: int, q: str) -> None:
            async with slots:
                try:
                    results[i] = await self.ask(q, **params)
                except (RemoteError, RequestTimeout) as e:
                    results[i] = f"{type(e).__name__}: {e}"

        await asyncio.gather(*(one(i, q) for i, q in enumerate(questions)))
        for r in results:
            if isinstance(r, str):
                out.errors.append(r)
                out.labels.append([])
                continue
            res, ms = r
            out.ms.append(ms)
            st = res.stats
            if st is not None:
                out.round_trips.append(st.store_round_trips)
                out.store_requests.append(st.store_requests)
                out.rows_read.append(st.rows_read)
                for k, n in st.stage_store_round_trips.items():
                    out.stage_round_trips.setdefault(k, []).append(n)
                for k, n in st.stage_store_requests.items():
                    out.stage_requests.setdefault(k, []).append(n)
                out.hits += st.label_cache_hits
                out.misses += st.label_cache_misses
                for k, v in st.stage_ms.items():
                    out.stage_ms.setdefault(k, []).append(v)
                out.ms_ex_embed.append(ms - st.stage_ms.get("embed", 0.0))
                if st.store_round_trips:
                    store = sum(v for k, v in st.stage_ms.items() if k not in ("embed", "llm"))
                    out.per_trip_ms.append(store / st.store_round_trips)
            out.triples.append(len(res.triples))
            if keep_labels:
                out.labels.append([(t.s, t.p, t.o) for t in res.triples])
        return out

    async def stop(self) -> None:
        """Close the client."""
        await self.client.stop()


async def warm_up(kg: KgflowClient, questions: Sequence[str], seconds: float, first: int = 3) -> dict[str, Any]:
    """Ask the first `first` questions (model, entity matrix, page cache), then keep asking
    (cycled, 4 at a time) until `seconds` have passed: a server backend just started answers
    1.5-2.4x slower until its JIT has compiled the query path. Nothing asked here is timed in
    the results; the first questions' p50 is kept as the cold figure."""
    began = time.perf_counter()
    cold = await kg.run(list(questions[:first]))
    asked, i = len(cold.ms), first
    while time.perf_counter() - began < seconds and questions:
        batch = [questions[(i + k) % len(questions)] for k in range(20)]
        asked += len((await kg.run(batch, concurrency=4)).ms)
        i += len(batch)
    return {
        "warm_up_questions": asked,
        "warm_up_s": round(time.perf_counter() - began, 1),
        "cold_p50_ms": round(percentile(cold.ms, 50), 2) if cold.ms else None,
    }


async def throughput(
    kg: KgflowClient,
    questions: Sequence[str],
    levels: Sequence[int],
    per_level: int,
    servers: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Requests per second at each concurrency level (`per_level` requests each, questions cycled),
    and the CPU cores in use meanwhile: this process, its event loop thread, each server (pid)."""
    rps: dict[str, float] = {}
    cores: dict[str, dict[str, float]] = {}
    procs = {"process": ("self", None), "event_loop": ("self", threading.main_thread().native_id)}
    procs.update({name: (pid, None) for name, pid in (servers or {}).items()})
    for c in levels:
        batch = [questions[i % len(questions)] for i in range(per_level)]
        before = {k: cpu_seconds(*v) for k, v in procs.items()}
        t = time.perf_counter()
        run = await kg.run(batch, concurrency=c)
        wall = time.perf_counter() - t
        rps[str(c)] = round((len(batch) - len(run.errors)) / wall, 1)
        cores[str(c)] = {k: round((cpu_seconds(*v) - before[k]) / wall, 2) for k, v in procs.items()}
    return {"throughput_rps": rps, "throughput_cpu_cores": cores, "load_average": round(os.getloadavg()[0], 1)}


async def forget_labels(system: System, collection: str) -> None:
    """Empty the label caches of `collection` (a GRAPH_CHANGED notice, as a load sends)."""
    prod = await system.bus.producer(GRAPH_CHANGED)
    try:
        await prod.send(GraphChanged(user=USER, collection=collection).model_dump_json().encode(), {})
    finally:
        await prod.close()
    await asyncio.sleep(0.2)  # the resolver applies notices asynchronously


async def label_cache_workload(system: System, kg: KgflowClient, questions: Sequence[str]) -> dict:  # type: ignore[type-arg]
    """Invalidate the collection's labels (GRAPH_CHANGED), then ask each of `questions` once, in
    order: a hit comes only from a label an earlier question also needed (a relation, a hub), never
    from asking the same question again. The second half's ratio shows the cache once warm."""
    await forget_labels(system, kg.collection)
    half = len(questions) // 2
    first, second = await kg.run(questions[:half]), await kg.run(questions[half:])
    hits, total = first.hits + second.hits, first.hits + first.misses + second.hits + second.misses
    later = second.hits + second.misses
    return {
        "label_cache_hit_ratio": round(hits / total, 4) if total else None,
        "workload": f"{len(questions)} distinct questions, each asked once, collection invalidated (GRAPH_CHANGED) "
        "first",
        "lookups": total,
        "hit_ratio_second_half": round(second.hits / later, 4) if later else None,
    }


async def classic_sample(
    system: System, collection: str, questions: Sequence[str], max_path_length: int, via_bus: bool = False
) -> dict[str, Any]:
    """The classic baseline on `questions`, sequentially, against the system's own stores
    (directly, or with every store call a request to the triples service over the bus)."""
    stores = system.stores
    limits = ClassicLimits(max_path_length=max_path_length)
    client = None
    store: Any = stores.triples
    if via_bus:
        client = RequestResponseClient(
            system.bus, topic("triples", "default"), topic("triples", "default", "response"), TriplesResponse, 600
        )
        store = BusPatterns(client)
    runs: list[tuple[ClassicResult, int]] = []  # each question's result and store requests
    for q in questions:
        with counting() as usage:  # as the stores count them (via the bus: as the triples service reports)
            res = await classic_retrieve(store, stores.entities, OnnxMiniLM.shared(), USER, collection, q, limits)
        runs.append((res, usage.requests))
    if client is not None:
        await client.stop()
    ms = [r.elapsed_ms for r, _ in runs]
    ex_embed = [r.elapsed_ms - r.stage_ms["embed"] for r, _ in runs]
    stage = {k: [r.stage_ms[k] for r, _ in runs] for k in (runs[0][0].stage_ms if runs else {})}

    def per_query(values: list[int]) -> float | None:
        return round(statistics.fmean(values), 1) if values else None

    return {
        "queries": len(questions),
        "classic_p50_ms": round(percentile(ms, 50), 2),
        "classic_p95_ms": round(percentile(ms, 95), 2),
        "classic_p50_ms_excluding_embed": round(percentile(ex_embed, 50), 2),
        "classic_store_calls_per_query": per_query([r.store_calls for r, _ in runs]),
        "classic_traversal_calls_per_query": per_query([r.traversal_calls for r, _ in runs]),
        "classic_label_calls_per_query": per_query([r.label_calls for r, _ in runs]),
        "classic_store_requests_per_query": per_query([n for _, n in runs]),
        "classic_stage_p50_ms": {k: round(percentile(v, 50), 2) for k, v in stage.items()},
        "limits": vars(limits),
    }
