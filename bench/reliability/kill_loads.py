"""Loads killed at random points (SIGKILL of `kgflow load triples`), then inspected and rerun.

A collection is consistent after a kill when it is in the old state (nothing stored), complete
(every triple and vector), or marked incomplete (an unfinished load state, which queries report).
Anything else (triples without a record, a finished record with vectors missing) is inconsistent.
"""

from __future__ import annotations

import asyncio
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.reliability.stack import KGFLOW
from processors.ingest.triples.readers import read_triples
from processors.query.graph_embeddings.service import collection_notices
from processors.stores.factory import open_stores
from processors.stores.settings import StoreSettings
from schemas.tenant import Tenant
from schemas.terms import RDFS_LABEL

USER = "default"


def _load(data: Path, home: Path, collection: str) -> subprocess.Popen[bytes]:
    argv = [str(KGFLOW), "load", "triples", str(data), "--home", str(home), "-C", collection, "--no-progress"]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def expected(data: Path) -> tuple[int, list[str]]:
    """Triples in the file, and every IRI the load must give a vector."""
    triples = list(read_triples(data))
    iris = {t.s.value for t in triples if t.p.value != RDFS_LABEL}
    iris |= {t.p.value for t in triples if t.p.value != RDFS_LABEL}
    iris |= {t.o.value for t in triples if t.o.is_iri and t.p.value != RDFS_LABEL}
    return len(set(triples)), sorted(iris)


async def inspect(home: Path, collection: str, want: tuple[int, list[str]]) -> str:
    """`old`, `complete`, `marked-incomplete` or `inconsistent`."""
    stores = open_stores(StoreSettings(home=home))
    try:
        state = await stores.triples.load_state(Tenant(USER, collection))
        stored = len(await stores.triples.pattern(Tenant(USER, collection), None, None, None, 1_000_000))
        vectors = len(await stores.entities.vectors(Tenant(USER, collection), want[1]))
        notices = await collection_notices(stores.triples, Tenant(USER, collection))
    finally:
        await stores.close()
    if state is None and stored == 0:
        return "old"
    if state is not None and state.complete and stored == want[0] and vectors == len(want[1]) and not notices:
        return "complete"
    if state is not None and not state.complete and any(n.type == "incomplete-collection" for n in notices):
        return "marked-incomplete"
    return "inconsistent"


def run(data: Path, workdir: Path, kills: int, seed: int = 7) -> dict[str, Any]:
    """Kill `kills` loads of `data` at random points; inspect each collection, rerun, inspect again."""
    rng = random.Random(seed)
    home = workdir / "home"
    want = expected(data)
    began = time.monotonic()
    ref = _load(data, home, "reference")
    if ref.wait() != 0:
        raise RuntimeError(f"reference load failed: {ref.stderr.read().decode() if ref.stderr else ''}")
    full_s = time.monotonic() - began
    after_kill: dict[str, int] = {}
    completed, repaired = 0, 0
    for i in range(kills):
        collection = f"killed-{i}"
        proc = _load(data, home, collection)
        time.sleep(rng.uniform(0.1, full_s * 1.05))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        outcome = asyncio.run(inspect(home, collection, want))
        after_kill[outcome] = after_kill.get(outcome, 0) + 1
        rerun = _load(data, home, collection)
        _, err = rerun.communicate()
        repaired += b"repaired:" in err
        completed += rerun.returncode == 0 and asyncio.run(inspect(home, collection, want)) == "complete"
    return {
        "loads_killed": kills,
        "full_load_s": round(full_s, 1),
        "after_kill": after_kill,
        "inconsistent": after_kill.get("inconsistent", 0),
        "reruns_completed": completed,
        "reruns_reporting_a_repair": repaired,
        "triples_per_load": want[0],
        "vectors_per_load": len(want[1]),
    }
