"""The community build and a one-document update over a synthetic concept graph of N chunks:
time and peak RSS.

    python -m bench communities [--size 100k 1m] [--shape corpus|hotpotqa] [--seed 7] [--out bench/results.json]

Each size runs in fresh processes: one generates the graph (cached in bench/.cache/communities/),
one builds over it, so the build's peak RSS (`getrusage`, the kernel's own peak) is the build's and
the arrays the store would hand over, nothing of the generator. The figures go to `communities`
in bench/results.json and, for 1M, to `documents_scale.community_build.1m` (only those keys change).

The graph is made chunk by chunk: each chunk mentions MENTIONS concepts (a share of them named by
no other chunk, the others drawn from a Zipf law over shared concepts whose number grows as
mentions^0.8: hubs in hundreds of chunks), and relates the concepts of each sentence pairwise
(weight: chunks sharing the pair). Shapes:
- `corpus` (default): the issue's 1M shape, the bench's 10k corpus: 4.3 concepts and 25
  relations per chunk (14 mentions, sentences of 4, 5 and 5 concepts, 24% named once): ~4.3M
  concepts and ~25M relations at 1M chunks.
- `hotpotqa`: HotpotQA as kgflow indexes it (2,187 chunks: 22,088 concepts, 38.7 relations per
  chunk): 17 mentions, sentences of 5, 6 and 6, 40% named once.

The build is the community-build processor's, store I/O aside: the graph as the store returns it
(`CommunityGraph`: IRIs once, int32/float32 arrays), Leiden and the levels (`hierarchy`), profiles
(`Profiles`), then every community's record made a page of 1,000 at a time with its profile vector
(the mean of its 10 heaviest chunks' vectors: random vectors stand in for the store's), as the store
writes them. The update is what follows a one-document write (a chunk of the same shape, some of
its concepts new): the stale level-0 communities and the new concepts re-clustered over the
subgraph they induce, and the new communities' records (`recluster`). `update_s` is that work;
the subgraph is cut from the arrays here (`update_subgraph_s`, where a store would run one indexed
query).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness.results import CACHE, RESULTS, run_meta, write_section
from bench.harness.stats import load_average

SHAPES: dict[str, dict[str, Any]] = {
    "corpus": {"mentions": 14, "sentences": (4, 5, 5), "new_share": 0.24},
    "hotpotqa": {"mentions": 17, "sentences": (5, 6, 6), "new_share": 0.4},
}
HEAPS_K, HEAPS_BETA = 1.77, 0.8  # the shared concepts: K * mentions^beta of them (Heaps' law)
ZIPF = 0.7  # their popularity (HotpotQA's most named concept: in 396 of 2,187 chunks)
DIMS = 384
SIZES = {"10k": 10_000, "20k": 20_000, "100k": 100_000, "1m": 1_000_000}
RSS_CAP_MB = 8_000  # a child past this is stopped (the machine is shared)
TIMEOUT_S = 3_600
MACHINE = {"cpu_count": os.cpu_count(), "machine": "2 cores shared with other sessions' tests and benchmarks"}


def synthetic_graph(chunks: int, seed: int, shape: str) -> tuple[np.ndarray, np.ndarray]:
    """(mentions: chunks x MENTIONS concept ids, relations: (a, b, weight) rows)."""
    s = SHAPES[shape]
    per = s["mentions"]
    rng = np.random.default_rng(seed)
    popular = int(HEAPS_K * (chunks * per) ** HEAPS_BETA)
    mentions = _draw(rng, popular, (chunks, per))
    fresh = rng.random((chunks, per)) < s["new_share"]  # a concept no other chunk names
    mentions[fresh] = popular + np.arange(int(fresh.sum()))
    mentions = _distinct_rows(mentions, int(mentions.max()) + 1)
    ids = int(mentions.max()) + 1
    return mentions, _relations(mentions, s["sentences"], ids)


def _draw(rng: np.random.Generator, popular: int, shape: tuple[int, int]) -> np.ndarray:
    p = 1.0 / np.arange(1, popular + 1) ** ZIPF
    return rng.choice(popular, size=shape, p=p / p.sum())


def _distinct_rows(mentions: np.ndarray, start: int) -> np.ndarray:
    """A concept repeated within a chunk becomes a fresh one: every chunk names distinct concepts."""
    srt = np.sort(mentions, axis=1)
    for i in np.flatnonzero((np.diff(srt, axis=1) == 0).any(axis=1)).tolist():
        seen: set[int] = set()
        for j, x in enumerate(mentions[i].tolist()):
            if x in seen:
                mentions[i, j] = start
                start += 1
            seen.add(int(mentions[i, j]))
    return mentions


def _relations(mentions: np.ndarray, sentences: tuple[int, ...], ids: int) -> np.ndarray:
    """(a, b, chunks sharing the pair) of the concept pairs of each sentence."""
    pairs, at = [], 0
    for size in sentences:
        sent = mentions[:, at : at + size]
        for i in range(size):
            for j in range(i + 1, size):
                a, b = np.minimum(sent[:, i], sent[:, j]), np.maximum(sent[:, i], sent[:, j])
                pairs.append(a.astype(np.int64) * ids + b)
        at += size
    keys, weight = np.unique(np.concatenate(pairs), return_counts=True)
    return np.stack([keys // ids, keys % ids, weight], axis=1)


def generate(chunks: int, seed: int, shape: str) -> Path:
    """The graph's arrays, cached (generation is not the build's work)."""
    path = CACHE / "communities" / f"{shape}-{chunks}-{seed}.npz"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        mentions, relations = synthetic_graph(chunks, seed, shape)
        tmp = path.with_suffix(".tmp.npz")
        np.savez(tmp, mentions=mentions.astype(np.int32), relations=relations.astype(np.int32))
        tmp.rename(path)
    return path


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build(path: Path, seed: int) -> dict[str, Any]:
    """Build the communities over the cached graph as the community-build processor does, then
    time one document's update (see the module docstring)."""
    from bench.graph.community_update import time_update
    from processors.algorithms.leiden import Edges, undirected
    from processors.ingest.communities.detect import CommunityParams, hierarchy
    from processors.ingest.communities.profiles import Profiles
    from processors.stores.community_graph import CommunityGraph, Mentions, mean_vector

    data = np.load(path)
    mentions, relations = data["mentions"], data["relations"]
    chunks, per = mentions.shape
    vocab = int(max(mentions.max(), relations[:, :2].max())) + 1
    rss_before = _rss_mb()
    started, cpu0 = time.perf_counter(), time.process_time()
    graph = CommunityGraph(
        [f"http://kgflow.org/e/concept_{i}" for i in range(vocab)],
        undirected(Edges.of(relations[:, 0], relations[:, 1], relations[:, 2]), vocab),  # as the store's reader
        [f"c{i:016x}" for i in range(chunks)],
        Mentions(mentions.ravel().astype(np.int32), np.repeat(np.arange(chunks, dtype=np.int32), per),
                 np.ones(mentions.size, dtype=np.int32)),
    )  # fmt: skip
    n_relations = len(relations)
    del relations
    read_s = time.perf_counter() - started
    params = CommunityParams()
    found = hierarchy(graph, params)
    detect_s = time.perf_counter() - started - read_s
    profiles = Profiles(found, graph)
    rng, rows = np.random.default_rng(seed), 0
    for page in profiles.pages():
        wanted = sorted({c for r in page for c in r.vector_chunks})
        vecs = dict(zip(wanted, rng.standard_normal((len(wanted), DIMS), dtype=np.float32), strict=True))
        for r in page:  # what the store does as it writes the page
            r.vector = mean_vector([vecs[c] for c in r.vector_chunks])
            rows += len(r.chunks)
    del profiles
    build_s = time.perf_counter() - started
    build_cpu_s = time.process_time() - cpu0
    build_peak = _rss_mb()
    update = time_update(graph, found, mentions, seed, params)
    return {
        "chunks": chunks, "concepts": int(len(np.unique(mentions))), "mentions": int(mentions.size),
        "relations": n_relations, "communities_per_level": {lv: len(ids) for lv, ids in enumerate(found.ids)},
        "community_chunk_rows": rows, "graph_in_memory_s": round(read_s, 1), "detect_s": round(detect_s, 1),
        "wall_s": round(build_s, 1), "cpu_s": round(build_cpu_s, 1), "peak_rss_mb": round(build_peak),
        "rss_before_build_mb": round(rss_before), **update, "peak_rss_mb_with_update": round(_rss_mb()),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    """Build at each size, each in child processes, and write the section's keys."""
    ap = argparse.ArgumentParser(prog="python -m bench communities", description=__doc__.splitlines()[0])
    ap.add_argument("--size", nargs="+", default=["100k", "1m"], choices=sorted(SIZES))
    ap.add_argument("--shape", default="corpus", choices=sorted(SHAPES))
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--one", type=Path, help=argparse.SUPPRESS)  # a child: build over this cached graph
    ap.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one:
        a.result.write_text(json.dumps(build(a.one, a.seed)))
        return
    load_at_start = load_average()
    out = {size: measure(SIZES[size], a.seed, a.shape) for size in a.size}
    section = {"shape": a.shape, "sizes": out, **MACHINE}
    write_section(a.out, "communities", section, load_at_start)
    if "peak_rss_mb" in out.get("1m", {}):
        write_key(a.out, "documents_scale", "community_build", {"1m": {
            k: out["1m"][k] for k in ("wall_s", "cpu_s", "peak_rss_mb", "update_s", "chunks", "concepts", "relations")
        } | {"shape": a.shape}}, load_at_start)  # fmt: skip


def measure(chunks: int, seed: int, shape: str) -> dict[str, Any]:
    """Generate (cached) in one child, build in another, bounded in time and memory."""
    from bench.documents.scale import run_bounded

    cmd = [sys.executable, "-c", f"from bench.graph.communities import generate; generate({chunks}, {seed}, {shape!r})"]
    made = run_bounded(cmd, TIMEOUT_S, RSS_CAP_MB)
    if made["exit"] != 0:
        return {"chunks": chunks, "error": f"generation: {made}"}
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        cmd = [sys.executable, "-m", "bench", "communities", "--one", str(generate(chunks, seed, shape)),
               "--result", str(result), "--seed", str(seed)]  # fmt: skip
        ran = run_bounded(cmd, TIMEOUT_S, RSS_CAP_MB)
        found = json.loads(result.read_text()) if result.exists() else {"chunks": chunks, "error": ran}
    print(f"[communities] {found}", file=sys.stderr, flush=True)
    return found


def write_key(path: Path, key: str, sub: str, value: dict[str, Any], load_at_start: list[float]) -> None:
    """Set results[key][sub] (the key's other entries kept) and meta[key.sub]."""
    results = json.loads(path.read_text()) if path.exists() else {}
    results.setdefault(key, {})[sub] = value
    results.setdefault("meta", {})[f"{key}.{sub}"] = run_meta(load_at_start)
    path.write_text(json.dumps(results, indent=2) + "\n")
