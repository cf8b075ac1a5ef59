"""Built document scale corpora, cached: SQLite homes in `bench/.cache/docscale/`, Neo4j
collections kept in the running server with a marker (the build keys, in a triple of a marker
collection, written through the store API after the build finished).

    python -m bench corpora --backend sqlite|neo4j --size 10k [--reuse-corpora] [--out FILE]

builds one corpus (or finds it) and writes what it took as JSON: bench/documents/scale.py runs it
as a child process, bounded in time and memory.

A corpus is keyed twice: `data` (the spec, the sources, the generating and writing code) and
`store_code` (the backend's store package: a change there may change what a write leaves, so it
rebuilds). `--reuse-corpora` reuses a corpus whose data key matches though its store code does
not (faster while iterating on a read path; the JSON says so).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.documents.corpus import SIZES, USER, CorpusSpec, build, data_key
from bench.documents.sources import Sources, prepare_sources
from bench.harness.results import CACHE as BENCH_CACHE
from bench.harness.results import ROOT
from bench.harness.servers import server_pids
from bench.harness.stats import load_average
from processors.base.settings import RuntimeSettings
from processors.commands.system import System, embedded
from processors.stores.documents_protocol import DocumentCounts
from processors.stores.settings import StoreSettings
from schemas.tenant import Tenant
from schemas.terms import Term, Triple

CACHE = BENCH_CACHE / "docscale"
STORES = ROOT / "processors" / "stores"
MARKER_S, MARKER_P = "urn:kgflow:bench:docscale", "urn:kgflow:bench:built"
BACKEND_CODE = {"sqlite": ("sqlite", "local"), "neo4j": ("neo4j",)}


def log(msg: str) -> None:
    """Progress on stderr."""
    print(msg, file=sys.stderr, flush=True)


def code_key(backend: str) -> str:
    """The store code a corpus was written with: the backend's packages and the protocols."""
    h = hashlib.sha256()
    files = [STORES / "documents_protocol.py", STORES / "protocol.py"]
    for package in BACKEND_CODE[backend]:
        files += sorted((STORES / package).glob("*.py"))
    for f in files:
        h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()[:16]


def store_settings(backend: str, home: Path) -> StoreSettings:
    """Embedded SQLite at `home`, or every store on the running Neo4j."""
    if backend == "sqlite":
        return StoreSettings(home=home)
    from bench.harness.servers import port

    return StoreSettings(home=home, triples_backend="neo4j", vectors_backend="neo4j", documents_backend="neo4j",
                         neo4j_url=f"bolt://127.0.0.1:{port('neo4j')}")  # fmt: skip


def collection(backend: str, size: str) -> str:
    """The corpus's collection (SQLite: in a home of its own)."""
    return "docscale" if backend == "sqlite" else f"docscale-{size}"


def sqlite_home(size: str, keys: dict[str, str], cache: Path = CACHE) -> Path:
    """Where the SQLite corpus of these keys lives."""
    return cache / f"sqlite-{size}-{keys['data']}-{keys['store_code']}"


class FileMarker:
    """A SQLite corpus's marker: `marker.json` in its home."""

    def __init__(self, home: Path) -> None:
        self.path = home / "marker.json"

    async def get(self) -> dict[str, Any] | None:
        return json.loads(self.path.read_text()) if self.path.exists() else None

    async def put(self, marker: dict[str, Any]) -> None:
        self.path.write_text(json.dumps(marker))


class TripleMarker:
    """A Neo4j corpus's marker: one triple in the collection `<collection>-built`, written through
    the triple store (the object a JSON literal)."""

    def __init__(self, system: System, coll: str) -> None:
        self.stores, self.coll = system.stores, coll + "-built"

    async def _rows(self) -> list[Triple]:
        return await self.stores.triples.pattern(
            Tenant(USER, self.coll), Term.iri(MARKER_S), Term.iri(MARKER_P), None, 10
        )

    async def get(self) -> dict[str, Any] | None:
        rows = await self._rows()
        return json.loads(rows[0].o.value) if rows else None

    async def put(self, marker: dict[str, Any]) -> None:
        await self.stores.triples.remove_triples(Tenant(USER, self.coll), await self._rows())
        triple = Triple(s=Term.iri(MARKER_S), p=Term.iri(MARKER_P), o=Term.literal(json.dumps(marker)))
        await self.stores.triples.add_triples(Tenant(USER, self.coll), [triple])


def _usable(marker: dict[str, Any] | None, keys: dict[str, str], reuse: bool) -> bool:
    """A finished build of these keys (of the data key alone with `reuse`)."""
    if not marker or marker["state"] != "built" or marker["keys"]["data"] != keys["data"]:
        return False
    return reuse or marker["keys"] == keys


def _cached_sqlite(size: str, keys: dict[str, str], reuse: bool, cache: Path) -> Path:
    """The home to use: a finished build of these keys (or, with `reuse`, of the data key), else
    this key's home (a build of it that stopped resumes there); every other home of the size goes."""
    home = sqlite_home(size, keys, cache)
    for p in sorted(cache.glob(f"sqlite-{size}-{keys['data']}-*")) if reuse else []:
        if (p / "marker.json").exists() and _usable(json.loads((p / "marker.json").read_text()), keys, reuse):
            return p
    for stale in cache.glob(f"sqlite-{size}-*"):
        if stale != home:
            log(f"[docscale] removing {stale.name}")
            shutil.rmtree(stale)
    home.mkdir(parents=True, exist_ok=True)
    return home


async def ensure(
    backend: str,
    size: str,
    spec: CorpusSpec,
    sources: Sources,
    reuse: bool,
    cache: Path = CACHE,
    progress: Path | None = None,
) -> dict[str, Any]:
    """The corpus of `spec` on `backend`: found (its marker says it was built with these keys),
    resumed (a build of these keys that stopped: batches are seeded by position, so the rest is
    what an uninterrupted build would have written) or built; its info."""
    keys = {"data": data_key(spec, sources), "store_code": code_key(backend)}
    coll = collection(backend, size)
    with tempfile.TemporaryDirectory(prefix="docscale-") as tmp:
        home = await asyncio.to_thread(_cached_sqlite, size, keys, reuse, cache) if backend == "sqlite" else Path(tmp)

        async def run(system: System) -> dict[str, Any]:
            marker = FileMarker(home) if backend == "sqlite" else TripleMarker(system, coll)
            found = await marker.get()
            if _usable(found, keys, reuse):
                return {**found["info"], "cached": True, "store_code_current": found["keys"] == keys}  # type: ignore[index]
            resume, spent = None, 0.0
            if found and found["state"] == "building" and found["keys"] == keys:
                documents = (await system.stores.documents.counts(USER)).get(coll, DocumentCounts(0, 0)).documents
                public = sum(len(v) for v in sources.public.values())
                if documents >= public:
                    resume, spent = documents - public, found["elapsed_s"]
            if resume is None:
                await _drop(system, coll)  # another spec's corpus, or a build stopped before its distractors
            log(f"[docscale] {coll}: " + (f"resuming after {resume} distractors" if resume else "building"))

            async def checkpoint(elapsed_s: float, distractors: int) -> None:
                state = {"state": "building", "keys": keys, "elapsed_s": round(spent + elapsed_s, 1)}
                await marker.put(state)
                if progress:
                    text = json.dumps({**state, "distractors": distractors, "of": spec.chunks})
                    await asyncio.to_thread(progress.write_text, text)

            await checkpoint(0.0, resume or 0)
            info = await _build_into(system, coll, spec, sources, resume, checkpoint)
            info.update(keys=keys, spec=spec.__dict__, size=size, resumed_after=resume,
                        built_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))  # fmt: skip
            info["build_s"] = round(spent + info["build_s"], 1)
            if backend == "sqlite":
                info["home"] = str(home)
                info["disk_mb"] = round(sum(f.stat().st_size for f in home.iterdir()) / 2**20, 1)
            await marker.put({"state": "built", "keys": keys, "info": info})
            return {**info, "cached": False, "store_code_current": True}

        return await _with_system(store_settings(backend, home), run)


async def _with_system(store: StoreSettings, fn: Any) -> Any:
    async with embedded(store, RuntimeSettings(request_timeout_s=3600.0)) as system:
        return await fn(system)


async def _build_into(
    system: System, coll: str, spec: CorpusSpec, sources: Sources, resume: int | None, checkpoint: Any
) -> dict[str, Any]:
    load, cpu = load_average(), _cpu_seconds()
    info = await build(system, coll, spec, sources, log, resume, checkpoint)
    # what bound the build: this process (linking, embedding, the driver) or the Neo4j server
    info["cpu_s"] = {k: round(v - cpu.get(k, 0.0), 1) for k, v in _cpu_seconds().items()}
    info["chunks"] = (await system.stores.documents.counts(USER)).get(coll, DocumentCounts(0, 0)).chunks
    info["concepts"] = (await system.stores.entities.collections(USER)).get(coll, 0)  # entity vectors
    info["triples"] = (await system.stores.triples.collections(USER)).get(coll, 0)
    info["load_average"] = {"start": load, "end": load_average()}
    return info


def _cpu_seconds() -> dict[str, float]:
    """CPU seconds (user + system) of this process and of each server deploy/servers.py runs."""
    out = {"this_process": time.process_time()}
    for name, pid in server_pids().items():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[f"{name}_server"] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


async def _drop(system: System, coll: str) -> None:
    """Every row of the collection (and of its marker collection) in every store."""
    s = system.stores
    for c in (coll, coll + "-built"):
        await s.documents.delete_collection(Tenant(USER, c))
        await s.communities.delete_collection(Tenant(USER, c))
        await s.triples.delete_collection(Tenant(USER, c))
        await s.entities.delete_collection(Tenant(USER, c))


# Distractors a store write takes: a Neo4j transaction of 2,000 (a ~25 MB request) timed out in the
# driver while the server was busy (load ~25); 500 were the fastest per document of 100 to 2,000.
BATCH = {"sqlite": 2000, "neo4j": 500}


def spec_for(size: str, backend: str, subset: int | None = None) -> CorpusSpec:
    """The spec of a size label (`10k`, `100k`, `1m`, or `1k` for tests) on `backend`."""
    return CorpusSpec(chunks=SIZES[size], subset=subset, batch=BATCH[backend])


async def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Build (or find) one corpus; print and write its info."""
    ap = argparse.ArgumentParser(prog="python -m bench corpora", description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=("sqlite", "neo4j"), required=True)
    ap.add_argument("--size", choices=tuple(SIZES), required=True)
    ap.add_argument(
        "--subset",
        type=int,
        default=None,
        help="tests: the public sets' first N questions' paragraphs, N MSFT transcripts",
    )
    ap.add_argument("--reuse-corpora", action="store_true", help="reuse a corpus built with other store code")
    ap.add_argument("--cache", type=Path, default=CACHE)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    began = time.perf_counter()
    sources = await prepare_sources(a.cache, a.subset, log)
    # The sources stay for the whole build and never change: out of the collector's way, a full
    # collection no longer walks their millions of objects during each batch's store writes
    # (store_profile --hold sources/frozen: 1.79-1.81 -> 1.57-1.64 CPU-ms a chunk at 50k+, load ~8, issue 38).
    gc.freeze()
    sources_s = round(time.perf_counter() - began, 1)
    spec = spec_for(a.size, a.backend, a.subset)
    progress = a.out.with_suffix(".progress.json") if a.out else None
    info = await ensure(a.backend, a.size, spec, sources, a.reuse_corpora, a.cache, progress)
    info["sources_s_this_run"] = sources_s
    text = json.dumps(info, indent=2)
    if a.out:
        a.out.write_text(text)
    print(text)
    return info
