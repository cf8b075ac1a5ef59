"""The SQLite store's write rate at a built corpus's size: new distractor batches (numbered past the
corpus, so every document is new) written into a copy of the built home exactly as the build writes
them (`DirectWriter`: linked against the collection, then claim, entity vectors, triples, records).

A build's `store_write_chunks_per_s` averages over every size it passed through; this is the rate
at the size itself, by batch size (issue 38: "within 2x of its own 10k rate up to 1M").

    python -m bench write-at-size [--sizes 10k,100k,1m] [--batch-sizes 2000,10000] [--batches 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.documents.corpus import DirectWriter, distractors
from bench.documents.sources import Sources, prepare_sources
from bench.documents.store_profile import write_summary
from bench.documents.stores import CACHE, collection, spec_for
from bench.harness.results import RESULTS, write_section
from bench.harness.stats import load_average
from processors.stores.factory import open_stores
from processors.stores.settings import StoreSettings

SECTION = "write-at-size"


def built_home(size: str, cache: Path = CACHE) -> Path | None:
    """The newest finished SQLite build of `size` (a stopped one resumes elsewhere), or None."""
    homes = [h for h in cache.glob(f"sqlite-{size}-*") if (h / "marker.json").exists()]
    built = [h for h in homes if json.loads((h / "marker.json").read_text()).get("state") == "built"]
    return max(built, key=lambda h: (h / "marker.json").stat().st_mtime) if built else None


async def write_batches(home: Path, size: str, sources: Sources, batch: int, count: int) -> dict[str, Any]:
    """Write `count` new batches of `batch` distractors into `home`; seconds by part and rates."""
    spec = spec_for(size, "sqlite")
    stores = open_stores(StoreSettings(home=home))
    writer = DirectWriter(stores, collection("sqlite", size), sources)
    per_batch: list[float] = []
    try:
        await writer.start()
        writer.seconds.clear()
        for n in range(count):
            prepared = writer.prepare(distractors(spec, sources, spec.chunks + n * batch, batch))
            began = time.perf_counter()
            await writer.write(prepared)
            per_batch.append(round(time.perf_counter() - began, 2))
    finally:
        await stores.close()
    return {
        "batch": batch,
        **write_summary(writer, batch * count),
        "seconds_per_batch": per_batch,
        "documents_ms_per_chunk": round(1000 * writer.seconds["documents"] / (batch * count), 3),
    }


async def measure(size: str, home: Path, sources: Sources, batch: int, count: int, log: Any) -> dict[str, Any]:  # noqa: ANN401
    """The rate at `size`: on a fresh copy of `home` (the built corpus is left as it was)."""
    with tempfile.TemporaryDirectory(prefix="write-at-size-", dir=home.parent) as tmp:
        copy = Path(tmp) / "home"
        shutil.copytree(home, copy, ignore=shutil.ignore_patterns("*.faiss"))
        log(f"[write-at-size] {size}: {count} batches of {batch} into a copy of {home.name}")
        return await write_batches(copy, size, sources, batch, count)


async def main(argv: list[str]) -> dict[str, Any]:
    """Measure each size and batch size; write `write-at-size` into bench/results.json."""
    ap = argparse.ArgumentParser(prog="python -m bench write-at-size", description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10k,100k,1m")
    ap.add_argument("--batch-sizes", default="2000,10000", help="distractors per store write")
    ap.add_argument("--batches", type=int, default=3, help="batches written at each size and batch size")
    a = ap.parse_args(argv)
    load = load_average()
    sources = await prepare_sources(CACHE)
    section: dict[str, Any] = {}
    for size in a.sizes.split(","):
        home = built_home(size)
        if home is None:
            section[size] = {"not_measured": f"no built SQLite {size} corpus in {CACHE} (python -m bench documents)"}
            continue
        runs = [await measure(size, home, sources, int(b), a.batches, print) for b in a.batch_sizes.split(",")]
        section[size] = {"home": home.name, "runs": runs}
        print(f"[write-at-size] {size}: " + ", ".join(f"{r['store_write_chunks_per_s']} chunks/s at {r['batch']}"
                                                      for r in runs))  # fmt: skip
    write_section(RESULTS, SECTION, section, load)
    return section
