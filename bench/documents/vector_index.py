"""`python -m bench vector-index`: the embedded vector index against libraries (recall, latency, build, bytes).

Today's IVF (processors/stores/sqlite/vector_lists.py) against sqlite-vec, usearch and faiss-cpu
(bench/documents/vector_engines.py) at 100k and 1M 384-d vectors (bench/documents/vector_data.py):
recall@10 against exact float32 search, search p50 over the queries (sequential, one thread),
build time, bytes on disk, recall@10 and p50 of a scoped query (the rows of 1% of the documents).
Writes `vector-index.<size>.<engine>` into bench/results.json after each engine, so a long 1M run
keeps what it finished.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from bench.documents import vector_data as data
from bench.documents.vector_engines import ENGINES, Engine, FaissIvfSq8, TodayIvf, Usearch, make
from bench.harness.results import CACHE, RESULTS, write_section
from bench.harness.stats import load_average, peak_rss_mb, percentile

SIZES = {"10k": 10_000, "100k": 100_000, "1m": 1_000_000}
SCOPE_SHARE = 0.01  # of the documents: a scoped search's subset
KEY = "vector-index"
WIDER_SEARCH = (128, 256)  # usearch expansion_search values measured beside the default


def blocks(corpus: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(row ids, vectors) a block at a time, read from the memory map."""
    for at in range(0, len(corpus), data.BLOCK):
        stop = min(len(corpus), at + data.BLOCK)
        yield np.arange(at, stop, dtype=np.int64), np.asarray(corpus[at:stop])


def scope(spec: data.DataSpec) -> tuple[np.ndarray, np.ndarray]:
    """A seeded 1% of the documents, and their row ids."""
    docs_total = spec.size // spec.chunks_per_doc
    rng = np.random.default_rng(spec.seed)
    docs = np.sort(rng.choice(docs_total, max(1, int(docs_total * SCOPE_SHARE)), replace=False))
    rows = (docs[:, None] * spec.chunks_per_doc + np.arange(spec.chunks_per_doc)).ravel()
    return docs, rows


def timed(fn: Any, queries: np.ndarray) -> tuple[list[np.ndarray], float]:
    """Each query's answer and the p50 latency (ms) of one query at a time."""
    fn(queries[0])  # a first search pays for loading; not a query's cost
    found, ms = [], []
    for q in queries:
        t = time.perf_counter()
        found.append(fn(q))
        ms.append((time.perf_counter() - t) * 1000)
    return found, round(percentile(ms, 50), 3)


def measure(name: str, spec: data.DataSpec, corpus: np.ndarray, queries: np.ndarray,
            truth: np.ndarray, scoped_truth: np.ndarray) -> dict[str, Any]:  # fmt: skip
    """One engine at one size: build it in a temporary directory, then search and scoped search."""
    docs, rows = scope(spec)
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as home:
        engine = make(name, Path(home), spec.chunks_per_doc, spec.size)
        load = load_average()
        t = time.perf_counter()
        engine.build(blocks(corpus))
        build_s = time.perf_counter() - t
        found, p50 = timed(lambda q: engine.search(q, data.K), queries)
        in_scope, scoped_p50 = timed(lambda q: engine.scoped(q, data.K, docs, rows), queries)
        out = {
            "build_s": round(build_s, 1),
            "inserts_per_s": round(spec.size / build_s),
            "bytes": engine.bytes(),
            "bytes_per_vector": round(engine.bytes() / spec.size, 1),
            "recall_at_10": data.recall_at(found, truth),
            "p50_ms": p50,
            "scoped_recall_at_10": data.recall_at(in_scope, scoped_truth),
            "scoped_p50_ms": scoped_p50,
            "load_average_at_build": load,
            "peak_rss_mb": peak_rss_mb(),
        }
        return out | extras(engine, corpus, queries, truth, scoped_truth, rows)


def extras(engine: Engine, corpus: np.ndarray, queries: np.ndarray, truth: np.ndarray,
           scoped_truth: np.ndarray, rows: np.ndarray) -> dict[str, Any]:  # fmt: skip
    """What one engine offers beside the common figures: today's IVF as the store searches,
    usearch with a wider search, faiss's scope over every list."""
    out: dict[str, Any] = {}
    if isinstance(engine, TodayIvf):
        rescored, rescored_p50 = timed(lambda q: engine.rescored(q, data.K, corpus), queries)
        out |= {"rescored_recall_at_10": data.recall_at(rescored, truth), "rescored_p50_ms": rescored_p50}
    if isinstance(engine, Usearch):  # recall bought back by a wider search (default 64)
        for ef in WIDER_SEARCH:
            engine.index.expansion_search = ef
            wider, wider_p50 = timed(lambda q: engine.search(q, data.K), queries)
            out[f"recall_at_10_expansion_{ef}"] = data.recall_at(wider, truth)
            out[f"p50_ms_expansion_{ef}"] = wider_p50
    if isinstance(engine, FaissIvfSq8):
        every, every_p50 = timed(lambda q: engine.scoped_all_lists(q, data.K, rows), queries)
        out |= {"nlist": engine.nlist, "nprobe": engine.nprobe,
                "scoped_every_list_recall_at_10": data.recall_at(every, scoped_truth),
                "scoped_every_list_p50_ms": every_p50}  # fmt: skip
    return out


def save(size: str, name: str, figures: dict[str, Any], load_at_start: list[float]) -> None:
    """Merge one engine's figures into the section's key (other sizes and engines kept)."""
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    section = results.get(KEY, {})
    section.setdefault(size, {})[name] = figures
    write_section(RESULTS, KEY, section, load_at_start)


def run_size(size: str, engines: list[str], n_queries: int, load_at_start: list[float]) -> None:
    """Every engine at one size, against the exact answers of that corpus."""
    spec = data.DataSpec(SIZES[size])
    centres, queries = data.real_centres(), data.real_queries(n_queries)
    corpus = data.corpus(spec, centres)
    _, rows = scope(spec)
    truth, scoped_truth = data.exact_top(corpus, queries), data.exact_top(corpus, queries, ids=rows)
    about = {"vectors": spec.size, "dim": data.DIM, "documents": spec.size // spec.chunks_per_doc,
             "real_centres": len(centres), "queries": len(queries), "scope_rows": len(rows),
             "spec": dataclasses.asdict(spec)}  # fmt: skip
    save(size, "data", about, load_at_start)
    for name in engines:
        print(f"{size} {name} ...", flush=True)
        save(size, name, measure(name, spec, corpus, queries, truth, scoped_truth), load_at_start)


def main(argv: list[str]) -> None:
    """Measure the named engines at the named sizes."""
    parser = argparse.ArgumentParser(prog="python -m bench vector-index", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100k,1m", help=f"comma-separated, of {', '.join(SIZES)}")
    parser.add_argument("--engines", default=",".join(ENGINES), help=f"comma-separated, of {', '.join(ENGINES)}")
    parser.add_argument("--queries", type=int, default=200, help="real questions searched (at most 300)")
    args = parser.parse_args(argv)
    sizes, engines = args.sizes.split(","), args.engines.split(",")
    wrong = [s for s in sizes if s not in SIZES] + [e for e in engines if e not in ENGINES]
    if wrong:
        parser.error(f"unknown size or engine: {', '.join(wrong)}")
    load_at_start = load_average()
    for size in sizes:
        run_size(size, engines, args.queries, load_at_start)
