"""The reranker: its latency, store round trips and effect on retrieval quality.

    python -m bench rerank [--doc-sets hotpotqa,musique] [--questions N] [--latency-questions N]
                           [--pq-questions N] [--out FILE]

In one run, on the embedded default (every processor in this process, memory bus, no LLM):

- latency: for 10 / 100 / 1,000 results (chunks of a doc-QA set, the best of a fused chunk
  search) and each strategy, the client-side time of a `reranker` request made as the retrieval
  services make it (question vector and entity-search seeds given), and its store round trips;
  also the round trips of a standalone request (the reranker searches the question's entities);
- recall@5 of lazy-rag on the public doc-QA sets with its `reranker` parameter at none and at
  each strategy (the sets have no timestamps: no document is an episode there);
- PathQuestion answer coverage of graph-rag's facts (the 10 a retrieval-only answer lists, the
  40 a model reads, and all retrieved) with `reranker` none and each strategy.

The section is merged into bench/results.json under `rerank`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.docqa import homes as docqa_homes
from bench.docqa.collection import COLLECTION, USER, client
from bench.docqa.protocol import mean_recall
from bench.docqa.quality import recall
from bench.graph import pathquestion
from bench.graph.measure import KgflowClient
from bench.harness.results import RESULTS, write_section
from bench.harness.stats import load_average, percentile
from processors.commands.system import System, embedded
from processors.models.embeddings.model import OnnxMiniLM
from processors.retrieval.graph_rag.rag import GraphRagSettings
from processors.retrieval.reranker.rerank import RerankerSettings
from processors.stores.settings import StoreSettings
from schemas.documents import ChunkSearch
from schemas.graph_embeddings import GraphEmbeddingsRequest
from schemas.graph_rag import SeedEntity
from schemas.lazy_rag import LazyRagRequest
from schemas.reranker import RerankItem, RerankRequest
from schemas.services import DOCUMENTS, GRAPH_EMBEDDINGS, LAZY_RAG, RERANKER

STRATEGIES = ("semantic", "episode", "distance", "hybrid")
CHOICES = ("none", *STRATEGIES)
SIZES = (10, 100, 1000)


def log(msg: str) -> None:
    """Progress on stderr."""
    print(msg, file=sys.stderr, flush=True)


def _p(values: list[float], q: float) -> float:
    return round(percentile(values, q), 2)


async def indexed_home(name: str) -> tuple[Path, list[dict[str, Any]]]:
    """The home holding the doc set `name` (titles kept) indexed through the documents flow: the
    documents benchmark's cached home (bench/docqa/homes.py)."""
    built = await docqa_homes.indexed_home(name, "titles", log)
    return built.home, docqa_homes.questions(name)


async def latency(system: System, questions: list[dict[str, Any]]) -> dict[str, Any]:
    """Rerank latency and round trips per strategy and result count (see the module docstring)."""
    load_at_start = load_average()
    rerank = client(system, RERANKER)
    search, ge = client(system, DOCUMENTS), client(system, GRAPH_EMBEDDINGS)
    embedder = OnnxMiniLM.shared()
    ms: dict[tuple[str, int], list[float]] = {}
    cpu: dict[tuple[str, int], list[float]] = {}
    server: dict[tuple[str, int], list[float]] = {}
    trips: dict[tuple[str, int], list[int]] = {}
    requests: dict[tuple[str, int], list[int]] = {}
    alone: dict[str, list[int]] = {s: [] for s in STRATEGIES}
    for n, q in enumerate(questions):
        text = q["question"]
        vector = (await embedder.embed([text]))[0]
        found = await ge.request(GraphEmbeddingsRequest(user=USER, collection=COLLECTION, vector=vector, text=text,
                                                        limit=RerankerSettings().seed_entities))  # fmt: skip
        seeds = [SeedEntity(id=m.entity.value, label=m.label, score=m.score, lexical=m.lexical) for m in found.entities]
        wide = ChunkSearch(user=USER, collection=COLLECTION, vector=vector, text=text, limit=max(SIZES))
        hits = (await search.request(wide)).chunks
        for size in SIZES:
            items = [RerankItem(id=c.id, kind="chunk", score=c.score or 0.0) for c in hits[:size]]
            for strategy in STRATEGIES:
                req = RerankRequest(user=USER, collection=COLLECTION, query=text, results=items, strategy=strategy,
                                    vector=vector, seeds=seeds)  # fmt: skip
                began, cpu_began = time.perf_counter(), time.process_time()
                res = await rerank.request(req)
                took, cpu_ms = (time.perf_counter() - began) * 1000, (time.process_time() - cpu_began) * 1000
                if n == 0:
                    continue  # warm-up: the first question loads indexes and caches
                ms.setdefault((strategy, size), []).append(took)
                cpu.setdefault((strategy, size), []).append(cpu_ms)
                server.setdefault((strategy, size), []).append(res.stats.elapsed_ms if res.stats else 0.0)
                trips.setdefault((strategy, size), []).append(res.stats.store_round_trips if res.stats else 0)
                requests.setdefault((strategy, size), []).append(res.stats.store_requests if res.stats else 0)
                if size == 100:
                    standalone = await rerank.request(req.model_copy(update={"seeds": None, "vector": None}))
                    alone[strategy].append(standalone.stats.store_round_trips if standalone.stats else 0)
    out: dict[str, Any] = {}
    for strategy in STRATEGIES:
        out[strategy] = {
            str(size): {
                "p50_ms": _p(ms[strategy, size], 50),
                "p95_ms": _p(ms[strategy, size], 95),
                "cpu_p50_ms": _p(cpu[strategy, size], 50),
                "server_p50_ms": _p(server[strategy, size], 50),
                "store_round_trips_mean": round(statistics.fmean(trips[strategy, size]), 2),
                "store_round_trips_max": max(trips[strategy, size]),
                "store_requests_mean": round(statistics.fmean(requests[strategy, size]), 2),
            }
            for size in SIZES
        }
        out[strategy]["standalone_100_store_round_trips_max"] = max(alone[strategy])
    out["load_average"] = {"start": load_at_start, "end": load_average()}
    out["requests_per_cell"] = len(questions) - 1
    out["results"] = (
        "chunks (best of a fused chunk search); vector + entity-search seeds given, as retrieval services do"
    )
    out["standalone"] = "question only: the reranker embeds it and searches its entities (one more round trip)"
    out["cpu"] = "CPU time of this process (every processor and store thread) per request: the load-independent cost"
    return out


async def recall_effect(system: System, questions: list[dict[str, Any]]) -> dict[str, Any]:
    """lazy-rag recall@k with each `reranker` value, same questions, same store."""
    lazy = client(system, LAZY_RAG)
    rows: dict[str, list[dict[str, float]]] = {c: [] for c in CHOICES}
    rerank_ms: dict[str, list[float]] = {c: [] for c in STRATEGIES}
    for q in questions:
        gold = set(q["supporting_paragraph_ids"])
        for choice in CHOICES:
            req = LazyRagRequest(user=USER, collection=COLLECTION, query=q["question"], no_llm=True, reranker=choice)
            res = await lazy.request(req)
            rows[choice].append(recall([d.id for d in res.documents], gold))
            if choice != "none" and res.stats:
                rerank_ms[choice].append(res.stats.stage_ms.get("rerank", 0.0))
    out: dict[str, Any] = {c: mean_recall(r) for c, r in rows.items()}
    base = out["none"]["recall@5"]
    out["recall@5_change"] = {c: round(out[c]["recall@5"] - base, 4) for c in STRATEGIES}
    out["rerank_stage_p50_ms"] = {c: _p(v, 50) for c, v in rerank_ms.items()}
    out["questions"] = len(questions)
    return out


async def pathquestion_effect(hops: int, limit: int) -> dict[str, Any]:
    """graph-rag's answer coverage in its top facts with each `reranker` value."""
    home, _ = await pathquestion.ensure_loaded(hops, log=log)
    qs = pathquestion.questions(hops)
    qs = [qs[int(i * len(qs) / limit)] for i in range(min(limit, len(qs)))]
    answer_k, model_k = GraphRagSettings().answer_facts, GraphRagSettings().llm_facts
    out: dict[str, Any] = {"questions": len(qs), "max_path_length": hops}
    async with embedded(StoreSettings(home=home)) as system:
        kg = KgflowClient(system, pathquestion.collection(hops), {"max_path_length": hops})
        try:
            await kg.ask(qs[0].question)
            for choice in CHOICES:
                cov = {answer_k: 0, model_k: 0, 0: 0}
                stage: list[float] = []
                extra: list[int] = []
                for q in qs:
                    res, _ = await kg.ask(q.question, reranker=choice, max_subgraph_size=150)
                    ranked = sorted(res.triples, key=lambda t: -(t.score if t.score is not None else 0.0))
                    for k in cov:
                        cov[k] += pathquestion.covered(q.answer, [(t.s, t.p, t.o) for t in ranked[: k or None]])
                    st = res.stats
                    if st is None:
                        continue
                    if choice != "none":  # what reranking cost the stores (the reranker reports it back)
                        stage.append(st.stage_ms.get("rerank", 0.0))
                        extra.append(st.stage_store_round_trips.get("rerank", 0))
                row: dict[str, Any] = {f"coverage@{k}" if k else "coverage_all": round(v / len(qs), 4)
                                       for k, v in cov.items()}  # fmt: skip
                if choice != "none":
                    row["rerank_stage_p50_ms"] = _p(stage, 50)
                    row["rerank_store_round_trips_max"] = max(extra)
                out[choice] = row
        finally:
            await kg.stop()
    base = out["none"][f"coverage@{answer_k}"]
    out[f"coverage@{answer_k}_change"] = {c: round(out[c][f"coverage@{answer_k}"] - base, 4) for c in STRATEGIES}
    return out


async def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the reranker benchmark and merge it into the results file."""
    ap = argparse.ArgumentParser(prog="python -m bench rerank", description=__doc__.splitlines()[0])
    ap.add_argument("--doc-sets", default="hotpotqa,musique")
    ap.add_argument(
        "--questions", type=int, default=None, help="doc-QA questions per set for recall (default all; 0: skip)"
    )
    ap.add_argument(
        "--latency-questions", type=int, default=21, help="questions per latency cell, +1 warm-up (0: skip)"
    )
    ap.add_argument("--pq-questions", type=int, default=300, help="PathQuestion questions per set (0: skip)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    a = ap.parse_args(argv)
    load_at_start = load_average()
    began = time.perf_counter()
    earlier = json.loads(a.out.read_text()) if a.out.exists() else {}
    section: dict[str, Any] = earlier.get("rerank", {})  # a partial run updates what it measures
    section.setdefault("recall", {})
    section.setdefault("pathquestion", {})
    for i, name in enumerate(x for x in a.doc_sets.split(",") if x):
        home, questions = await indexed_home(name)
        async with embedded(StoreSettings(home=home)) as system:
            if i == 0 and a.latency_questions > 1:
                log(f"[rerank] latency on {name}: {a.latency_questions} questions x {len(SIZES)} sizes")
                section["latency"] = await latency(system, questions[: a.latency_questions])
                section["latency"]["doc_set"] = name
            if a.questions != 0:
                log(f"[rerank] {name}: lazy-rag recall with reranker {CHOICES}")
                section["recall"][name] = await recall_effect(system, questions[: a.questions])
    for hops in (2, 3) if a.pq_questions else ():
        log(f"[rerank] PathQuestion {hops}H: graph-rag coverage with reranker {CHOICES}")
        section["pathquestion"][f"pq{hops}"] = await pathquestion_effect(hops, a.pq_questions)
    section["run"] = {
        "wall_s": round(time.perf_counter() - began, 1),
        "defaults": RerankerSettings().model_dump(mode="json"),
    }
    section["targets"] = targets(section)
    write_section(a.out, "rerank", section, load_at_start)
    return section


def targets(section: dict[str, Any]) -> dict[str, Any]:
    """The reranker's targets (latency added, round trips, recall effect) beside the measured figures."""
    out: dict[str, Any] = {}
    lat = section.get("latency", {})
    max_d = RerankerSettings().max_distance
    for strategy in STRATEGIES:
        if strategy in lat:
            p50 = lat[strategy]["100"]["p50_ms"]
            out[f"{strategy}_100_results_p50_ms (<= 20)"] = {"value": p50, "met": p50 <= 20}
    if "distance" in lat:
        worst = max(lat["distance"][str(n)]["store_round_trips_max"] for n in SIZES)
        out[f"distance_store_round_trips_max (<= max-distance + 1 = {max_d + 1})"] = {
            "value": worst,
            "met": worst <= max_d + 1,
        }
    return out
