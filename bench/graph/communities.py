"""The community build over a synthetic concept graph of N chunks: time and peak RSS.

    python -m bench communities [--chunks 20000 100000] [--seed 7] [--out bench/results.json]

Each size runs in a fresh process (its peak RSS is that build's alone); the figures go to
`communities` in bench/results.json (only that key is replaced).

The graph has the degree structure measured on the HotpotQA corpus indexed by kgflow (2,187
chunks): 17 distinct concepts mentioned per chunk, concept popularity heavy-tailed (most
concepts in one chunk, a few in hundreds), and co-occurrence relations between the concepts of
each sentence (three sentences of 5-6 concepts: 40 pairs per chunk; weight = chunks sharing the
pair), so ~40 relations per chunk (HotpotQA: 38.7). 40% of the mentions name a concept no other
chunk names; the others follow a Zipf law over shared concepts whose number grows as mentions^0.8.
At 2,187 chunks this gives 21,450 concepts (HotpotQA 22,088), 81% of them in one chunk (80%), the
most named in 402 chunks (396) and 39.7 relations per chunk (38.7).

The build is the community-build processor's, store reads aside: the graph (relation weights and
mentions, as the store returns them: Python tuples), hierarchical Leiden (`detect`), profiles
(`profile`), then each community's profile vector from its 10 heaviest chunks' vectors read a page
of 1,000 communities at a time (random vectors stand in for the store's).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness.results import RESULTS, write_section
from bench.harness.stats import load_average

MENTIONS_PER_CHUNK = 17
SENTENCES = (5, 6, 6)  # concepts per sentence: 10 + 15 + 15 pairs
NEW_SHARE = 0.4  # mentions of a concept no other chunk names (HotpotQA: 80% of concepts are in one chunk)
HEAPS_K, HEAPS_BETA = 1.77, 0.8  # the shared concepts: K * mentions^beta of them (Heaps' law)
ZIPF = 0.7  # their popularity (HotpotQA's most named concept: in 396 of 2,187 chunks)
VECTOR_PAGE = 1000
DIMS = 384
MACHINE = {"cpu_count": os.cpu_count(), "machine": "2 cores shared with other sessions' tests and benchmarks"}


def synthetic_graph(chunks: int, seed: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(mentions: chunks x MENTIONS_PER_CHUNK concept ids, relations: (a, b, weight) rows, concept ids used)."""
    rng = np.random.default_rng(seed)
    popular = int(HEAPS_K * (chunks * MENTIONS_PER_CHUNK) ** HEAPS_BETA)
    p = 1.0 / np.arange(1, popular + 1) ** ZIPF
    p /= p.sum()
    slots = (chunks, MENTIONS_PER_CHUNK)
    mentions = rng.choice(popular, size=slots, p=p)
    fresh = rng.random(slots) < NEW_SHARE  # a concept no other chunk names (most concepts are such)
    mentions[fresh] = popular + np.arange(int(fresh.sum()))
    for i in np.flatnonzero([len(set(row)) < MENTIONS_PER_CHUNK for row in mentions.tolist()]):
        seen: set[int] = set()  # a repeat within a chunk becomes a fresh concept: 17 distinct each
        for j, x in enumerate(mentions[i].tolist()):
            if x in seen:
                mentions[i, j] = popular + int(fresh.sum()) + i * MENTIONS_PER_CHUNK + j
            seen.add(int(mentions[i, j]))
    ids = int(mentions.max()) + 1
    pairs = []
    at = 0
    for size in SENTENCES:
        sent = mentions[:, at : at + size]
        for i in range(size):
            for j in range(i + 1, size):
                a, b = np.minimum(sent[:, i], sent[:, j]), np.maximum(sent[:, i], sent[:, j])
                pairs.append(a * ids + b)
        at += size
    keys, weight = np.unique(np.concatenate(pairs), return_counts=True)
    relations = np.stack([keys // ids, keys % ids, weight], axis=1)
    return mentions, relations, ids


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def build(chunks: int, seed: int) -> dict[str, Any]:
    """Generate the graph, then time the build as the community-build processor runs it."""
    from processors.ingest.communities.detect import CommunityParams, detect
    from processors.ingest.communities.profiles import profile, set_vectors, vector_chunks

    mentions, relations, vocab = synthetic_graph(chunks, seed)
    concepts = len(np.unique(mentions))
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started, cpu0 = time.perf_counter(), _cpu_s()
    iri = [f"http://kgflow.org/e/concept_{i}" for i in range(vocab)]
    chunk_ids = [f"c{i:016x}" for i in range(chunks)]
    edges = [(iri[a], iri[b], float(w)) for a, b, w in relations.tolist()]  # as CommunityStore.graph returns
    men = [(iri[e], chunk_ids[c], 1) for c, row in enumerate(mentions.tolist()) for e in row]
    n_relations = len(edges)
    del mentions, relations
    read_s = time.perf_counter() - started
    found = detect(edges, CommunityParams())
    detect_s = time.perf_counter() - started - read_s
    records = profile(found, men, edges)
    del edges, men
    rng = np.random.default_rng(seed)
    for at in range(0, len(records), VECTOR_PAGE):
        page = records[at : at + VECTOR_PAGE]
        ids = sorted({c for r in page for c in vector_chunks(r)})
        vecs = rng.standard_normal((len(ids), DIMS), dtype=np.float32)
        set_vectors(page, dict(zip(ids, vecs.tolist(), strict=True)))
    total = time.perf_counter() - started
    levels: dict[int, int] = {}
    for r in records:
        levels[r.level] = levels.get(r.level, 0) + 1
    return {
        "chunks": chunks,
        "concepts": concepts,
        "mentions": chunks * MENTIONS_PER_CHUNK,
        "relations": n_relations,
        "communities_per_level": levels,
        "community_chunk_rows": sum(len(r.chunks) for r in records),
        "graph_in_memory_s": round(read_s, 1),
        "detect_s": round(detect_s, 1),
        "build_s": round(total, 1),
        "build_cpu_s": round(_cpu_s() - cpu0, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "rss_before_build_mb": round(rss_before),
    }


def main(argv: list[str] | None = None) -> None:
    """Build the community graph at each size, each in a child process, and write its key."""
    ap = argparse.ArgumentParser(prog="python -m bench communities", description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, nargs="+", default=[20_000, 100_000])
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a child: one size, this process
    a = ap.parse_args(argv)
    if a.one:
        print(json.dumps(build(a.chunks[0], a.seed)))
        return
    out: dict[str, Any] = {}
    load_at_start = load_average()
    for n in a.chunks:
        done = subprocess.run([sys.executable, "-m", "bench", "communities", "--one", "--chunks", str(n),
                               "--seed", str(a.seed)], capture_output=True, text=True)  # fmt: skip
        out[str(n)] = json.loads(done.stdout) if done.returncode == 0 else {"chunks": n, "error": done.stderr[-800:]
                                                                            or f"exit {done.returncode}"}  # fmt: skip
        print(f"[community-scale] {out[str(n)]}", file=sys.stderr, flush=True)
    write_section(a.out, "communities", {"sizes": out, "at_1m": at_one_million(out), **MACHINE}, load_at_start)


def at_one_million(sizes: dict[str, Any]) -> dict[str, Any]:
    """1M chunks: measured, or projected linearly from the largest size measured (the build holds the
    graph as Python objects, so its memory grows with the relations, ~40 per chunk)."""
    done = [r for r in sizes.values() if "peak_rss_mb" in r]
    if not done:
        return {}
    big = max(done, key=lambda r: r["chunks"])
    if big["chunks"] >= 1_000_000:
        return {"measured": True, "build_s": big["build_s"], "peak_rss_mb": big["peak_rss_mb"]}
    scale = 1_000_000 / big["chunks"]
    return {"measured": False, "from_chunks": big["chunks"], "relations": round(big["relations"] * scale),
            "peak_rss_mb_linear_projection": round(big["peak_rss_mb"] * scale),
            "why_not_measured": "the build holds every relation as Python objects (detect, profile): at the "
            "measured bytes per chunk 1M chunks need more memory than this 24 GB machine, shared with other "
            "sessions, has free"}  # fmt: skip
