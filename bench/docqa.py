"""`make bench` (documents): index cost and document-retrieval quality on the public doc-QA sets.

    python -m bench.docqa [--datasets hotpotqa,musique] [--questions N] [--llm-questions N]
                          [--out bench/results.json]

For each set, in one run: the corpus is indexed into a fresh embedded home through the real
documents flow (documents/s, chunks/s, concepts, relations, communities per level, build time,
model calls at index time, peak RSS); then every question is asked of lazy-rag, DRIFT and
kg-query in each mode (no model) and of the chunk search alone (vector only, lexical only,
fused), and recall@2/5/10 of the supporting paragraphs is computed as ../shared/tools/docqa_eval.py
does (distinct documents in rank order); the same questions scoped to their own context
paragraphs give the cost of a scope (bench/docqa_quality.py). Then lazy-rag and DRIFT answer the
first few questions of the first set with the local model (bench/docqa_llm.py).
The section is merged into bench/results.json under "documents", with the issues' targets.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from prometheus_client import REGISTRY

from bench.docqa_llm import with_local_model
from bench.docqa_quality import COLLECTION, SCOPE_TARGET, TIMEOUT_S, USER, client, kg_query_modes, quality, scope_cost
from bench.measure import peak_rss_mb
from processors.algorithms.iris import RELATED_TO
from processors.base.runtime import System, embedded
from processors.base.settings import RuntimeSettings
from processors.commands.load_documents import batches
from processors.stores.settings import StoreSettings
from schemas.communities import BuildCommunities
from schemas.documents import Document, LoadDocuments
from schemas.services import COMMUNITY_BUILD, DOCUMENT_LOAD
from schemas.terms import Term

ROOT = Path(__file__).resolve().parent.parent
DOCQA = ROOT.parent / "shared" / "datasets" / "docqa"
SETS = {"hotpotqa": DOCQA / "hotpotqa_dev200_migres", "musique": DOCQA / "musique_train100_kag"}
RESULTS = Path(__file__).resolve().parent / "results.json"
CACHE = Path(__file__).resolve().parent / ".cache" / "docqa"


def log(msg: str) -> None:
    """Progress on stderr."""
    print(msg, file=sys.stderr, flush=True)


def _llm_requests() -> float:
    """Text-completion requests served so far in this process (the model calls)."""
    total = 0.0
    for metric in REGISTRY.collect():
        for sample in metric.samples:
            if sample.name == "kgflow_requests_total" and sample.labels.get("service") == "text-completion":
                total += sample.value
    return total


async def index(system: System, docs: list[Document]) -> dict[str, Any]:
    """Index `docs` through the documents flow; what it cost."""
    llm_before, began = _llm_requests(), time.perf_counter()
    loader, chunks, failed, reported_calls = client(system, DOCUMENT_LOAD), 0, 0, 0
    slots = asyncio.Semaphore(2)

    async def one(batch: list[Document]) -> None:
        nonlocal chunks, failed, reported_calls
        async with slots:
            async for res in loader.stream(LoadDocuments(user=USER, collection=COLLECTION, documents=batch)):
                if res.end_of_stream:
                    chunks += res.chunks
                    failed += len(res.failed)
                    reported_calls += res.llm_calls

    await asyncio.gather(*(one(b) for b in batches(docs)))
    loaded_s = time.perf_counter() - began
    built = await client(system, COMMUNITY_BUILD).request(BuildCommunities(user=USER, collection=COLLECTION))
    total_s = time.perf_counter() - began
    relations = await system.stores.triples.pattern(USER, COLLECTION, None, Term.iri(RELATED_TO), None, 10_000_000)
    concepts = (await system.stores.entities.collections(USER)).get(COLLECTION, 0)
    return {
        "documents": len(docs),
        "failed": failed,
        "chunks": chunks,
        "concepts": concepts,
        "relations": len(relations),
        "communities_per_level": {str(k): v for k, v in sorted(built.levels.items())},
        "load_s": round(loaded_s, 1),
        "community_build_s": round(built.build_ms / 1000, 2),
        "index_s": round(total_s, 1),
        "documents_per_s": round(len(docs) / total_s, 1),
        "chunks_per_s": round(chunks / total_s, 1),
        "llm_calls_at_index_time": int(_llm_requests() - llm_before),  # text-completion's own request counter
        "llm_calls_reported_by_load": reported_calls,  # the load responses' count (extractor `llm`: one per chunk)
        "peak_rss_mb": peak_rss_mb(),
    }


async def bench_set(name: str, path: Path, limit: int | None, llm_questions: int = 0) -> dict[str, Any]:
    """Index one set into a fresh home, then measure retrieval on it."""
    docs = [Document.model_validate_json(line) for line in (path / "corpus.jsonl").read_text().splitlines() if line]
    questions = [json.loads(line) for line in (path / "questions.jsonl").read_text().splitlines() if line]
    questions = [q for q in questions if q.get("supporting_paragraph_ids")][:limit]
    home = CACHE / name
    shutil.rmtree(home, ignore_errors=True)
    async with embedded(StoreSettings(home=home), RuntimeSettings(request_timeout_s=TIMEOUT_S)) as system:
        log(f"[docqa] {name}: indexing {len(docs)} documents")
        cost = await index(system, docs)
        log(f"[docqa] {name}: indexed in {cost['index_s']} s; {len(questions)} questions")
        out = {"index": cost, "retrieval": await quality(system, questions)}
        out["kg_query_modes"] = await kg_query_modes(system, questions)
        out["scope_cost"] = await scope_cost(system, questions)
    if llm_questions:
        out["with_local_model"] = await with_local_model(home, questions[:llm_questions], log)
    return out


async def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the documents benchmark and merge it into the results file."""
    ap = argparse.ArgumentParser(prog="python -m bench.docqa", description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="hotpotqa,musique")
    ap.add_argument("--questions", type=int, default=None, help="questions per set (default all)")
    ap.add_argument("--llm-questions", type=int, default=3, help="questions answered with the local model")
    ap.add_argument("--out", type=Path, default=RESULTS)
    a = ap.parse_args(argv)
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    names = a.datasets.split(",")
    section: dict[str, Any] = {
        name: await bench_set(name, SETS[name], a.questions, a.llm_questions if i == 0 else 0)
        for i, name in enumerate(names)
    }
    earlier = json.loads(a.out.read_text()).get("documents", {}) if a.out.exists() else {}
    # A run of some sets keeps the others' figures (each set says when it was measured).
    section = {**{k: v for k, v in earlier.items() if k in SETS and k not in section}, **section}
    for name in names:
        section[name]["measured_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    section["meta"] = {
        "load_average_at_start": load_at_start,
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "llm": "none at index time and for recall (no_llm); with_local_model: SmolLM2-135M (llama.cpp)",
    }
    section["targets"] = targets(section)
    write_section(a.out, "documents", section)
    return section


def write_section(path: Path, name: str, section: dict[str, Any]) -> None:
    """Merge `section` into the results file under `name` (other sections kept), and print it."""
    results = json.loads(path.read_text()) if path.exists() else {}
    results[name] = section
    path.write_text(json.dumps(results, indent=2))
    print(json.dumps(section, indent=2))


def targets(section: dict[str, Any]) -> dict[str, Any]:
    """Issues 13 and 14's targets beside the measured figures."""
    out: dict[str, Any] = {}
    if "hotpotqa" in section:
        h = section["hotpotqa"]
        out["hotpotqa_index_s (< 180)"] = {"value": h["index"]["index_s"], "met": h["index"]["index_s"] < 180}
        out["llm_calls_at_index_time (= 0)"] = {"value": h["index"]["llm_calls_at_index_time"],
                                                 "met": h["index"]["llm_calls_at_index_time"] == 0}  # fmt: skip
        gain = h["retrieval"]["lazy_rag_recall@5_over_better_baseline"]
        out["hotpotqa_lazy_rag_recall@5_gain (>= 0.10)"] = {"value": gain, "met": gain >= 0.10}
        p50, p95 = h["retrieval"]["lazy_rag_p50_ms"], h["retrieval"]["lazy_rag_p95_ms"]
        out["hotpotqa_lazy_rag_p50_ms (<= 150)"] = {"value": p50, "met": p50 <= 150}
        out["hotpotqa_lazy_rag_p95_ms (<= 400)"] = {"value": p95, "met": p95 <= 400}
        llm = h.get("with_local_model", {}).get("lazy_rag")
        if llm:
            wall = llm["wall_p50_s"]
            out["hotpotqa_lazy_rag_local_model_p50_s (< 3, <= 50 entities)"] = {"value": wall, "met": wall < 3}
    if "musique" in section:
        gain = section["musique"]["retrieval"]["lazy_rag_recall@5_over_better_baseline"]
        out["musique_lazy_rag_recall@5_gain (>= 0.12)"] = {"value": gain, "met": gain >= 0.12}
    for name in ("hotpotqa", "musique"):
        cost = section.get(name, {}).get("scope_cost", {})
        for service in ("lazy_rag", "kg_query_mix"):
            if service in cost:
                ratio = cost[service]["scoped_p50_over_unscoped"]
                key = f"{name}_{service}_scoped_p50_over_unscoped (<= {SCOPE_TARGET})"
                out[key] = {"value": ratio, "met": ratio <= SCOPE_TARGET}
    return out


if __name__ == "__main__":
    asyncio.run(main())
