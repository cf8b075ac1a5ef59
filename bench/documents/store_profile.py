"""The store side of a corpus build alone: distractor batches made once (pickled), then written
into a fresh SQLite home (or a copy of one holding a corpus already) exactly as the build writes
them (`DirectWriter.write`: claim, entity vectors, triples, records), timed per part, optionally
under cProfile. Issue 38 item 2: SQLite >= 2,000 chunks/s store side, within 2x of its 10k rate.

    python -m bench.documents.store_profile make --chunks 12000 --out BATCHES_DIR
    python -m bench.documents.store_profile write BATCHES_DIR --home H [--from 0 --count 5]
        [--base HOME_TO_COPY] [--profile out.prof]
    python -m bench.documents.store_profile dump H  # every table's rows, ordered, hashed

The batches are made from an empty collection (no public documents), so a replay writes what a
build's distractors write; `--base` copies a home that holds the earlier batches first.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import hashlib
import json
import pickle
import shutil
import sqlite3
import time
from collections import defaultdict
from concurrent.futures import Executor, Future
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bench.documents.batch_maker import from_wire, to_wire
from bench.documents.corpus import STORE_PARTS, CorpusSpec, DirectWriter, batches, distractors
from bench.documents.sources import prepare_sources
from bench.documents.stores import CACHE
from bench.harness.stats import load_average
from processors.stores.factory import open_stores
from processors.stores.settings import StoreSettings
from processors.stores.sqlite import pool as sqlite_pool

COLLECTION = "docscale"


async def make(chunks: int, batch: int, out: Path) -> None:
    """Pickle (a file each, into `out`) the batches of a `chunks`-distractor corpus, as the build's child makes them."""
    sources = await prepare_sources(CACHE)
    spec = CorpusSpec(chunks=chunks, batch=batch)
    writer = DirectWriter(None, COLLECTION, sources)  # type: ignore[arg-type]
    for n, (start, count) in enumerate(batches(spec, 0)):
        _save(out / f"{n:04d}.pkl", to_wire(writer.prepare(distractors(spec, sources, start, count))))
        print(f"made {start + count}", flush=True)


def _save(path: Path, batch: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL))


def _files(path: Path, first: int, count: int | None) -> list[Path]:
    return sorted(path.glob("*.pkl"))[first : None if count is None else first + count]


def _read(file: Path) -> Any:  # noqa: ANN401 - a pickled batch
    return from_wire(pickle.loads(file.read_bytes()))  # noqa: S301 - our own files


def _load(path: Path, first: int, count: int | None) -> list[object]:
    """The batches, all read (neo4j_profile's replay holds them)."""
    return [_read(f) for f in _files(path, first, count)]


def _fresh(home: Path, base: Path | None) -> None:
    """`home` empty, or a copy of `base`."""
    if home.exists():
        shutil.rmtree(home)
    if base:
        shutil.copytree(base, home)


async def write(
    path: Path, home: Path, first: int, count: int | None, base: Path | None, prof: Path | None, held: str = "none"
) -> dict:
    """Write batches `first` .. `first + count - 1` into `home` (a copy of `base`, when given).
    `held`: "sources" holds the corpus sources in the process as a build does (their millions of
    objects are what each full garbage collection walks), "frozen" holds them gc-frozen."""
    sources = await prepare_sources(CACHE) if held != "none" else None
    if held == "frozen":
        gc.freeze()
    chosen = _files(path, first, count)
    _fresh(home, base)
    statements: defaultdict[str, float] = defaultdict(float)
    if prof:  # the stores' work runs in their executor threads, which cProfile does not see
        sqlite_pool.ThreadPoolExecutor = _Inline  # type: ignore[misc,assignment]
        _time_statements(statements)
    stores = open_stores(StoreSettings(home=home))
    writer = DirectWriter(stores, COLLECTION, SimpleNamespace(label_vectors={}))  # type: ignore[arg-type]
    load = load_average()
    profiler = cProfile.Profile(time.thread_time) if prof else None  # CPU: the machine is shared
    collections = _GcClock()
    gc.callbacks.append(collections)
    written, cpu = 0, 0.0
    try:
        for file in chosen:
            # read when written, as the build receives each batch from its child: one held at a
            # time (held all, each full collection walked them all: 17% of the CPU at 2 batches)
            batch = _read(file)
            began, collections.on = time.process_time(), True
            if profiler:
                profiler.enable()
            await writer.write(batch)
            if profiler:
                profiler.disable()
            collections.on = False
            cpu += time.process_time() - began  # this process's CPU (every thread's): the writes alone
            written += len(batch.linked.records)
            del batch
    finally:
        gc.callbacks.remove(collections)
        await stores.close()
    if profiler and prof:
        profiler.dump_stats(str(prof))
    return {
        **write_summary(writer, written),
        "cpu_s": round(cpu, 2),
        "cpu_ms_per_chunk": round(1000 * cpu / max(written, 1), 3),
        "load_average": {"start": load, "end": load_average()},
        "held": held if sources is not None else "none",
        "gc_s": round(collections.seconds, 2),
        "gc_full_collections": collections.full,
        "statement_s": {k: round(v, 3) for k, v in sorted(statements.items(), key=lambda kv: -kv[1])[:25]},
    }


def write_summary(writer: DirectWriter, written: int) -> dict[str, Any]:
    """The chunks written, the writer's seconds by part and the store-side rate."""
    store_s = sum(writer.seconds[k] for k in STORE_PARTS)
    return {
        "chunks": written,
        "seconds": {k: round(v, 2) for k, v in sorted(writer.seconds.items())},
        "store_write_chunks_per_s": round(written / store_s, 1),
    }


def _time_statements(into: defaultdict[str, float]) -> None:
    """Add each statement's CPU seconds (by its first 70 characters) to `into`."""
    conn_class = sqlite_pool.CountedConnection
    plain_execute, plain_many = conn_class.execute, conn_class.executemany

    def execute(self: Any, sql: str, parameters: Any = (), /) -> Any:
        t = time.thread_time()
        try:
            return plain_execute(self, sql, parameters)
        finally:
            into[sql[:70]] += time.thread_time() - t

    def executemany(self: Any, sql: str, parameters: Any, /) -> Any:
        rows = list(parameters)  # built outside the timed part
        t = time.thread_time()
        try:
            return plain_many(self, sql, rows)
        finally:
            into["many: " + sql[:64]] += time.thread_time() - t

    conn_class.execute, conn_class.executemany = execute, executemany  # type: ignore[method-assign]


class _GcClock:
    """The seconds the garbage collector ran and its full collections while `on` (a `gc.callbacks` entry)."""

    def __init__(self) -> None:
        self.seconds, self.full, self._began, self.on = 0.0, 0, 0.0, False

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if not self.on:
            return
        if phase == "start":
            self._began = time.perf_counter()
            return
        self.seconds += time.perf_counter() - self._began
        self.full += info["generation"] == 2


class _Inline(Executor):
    """Runs each submitted call at once in the caller's thread (under the profiler)."""

    def __init__(self, *_: object, **__: object) -> None:
        super().__init__()

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN002, ANN003
        done: Future[object] = Future()
        try:
            done.set_result(fn(*args, **kwargs))
        except BaseException as e:  # noqa: BLE001 - handed to the awaiting caller
            done.set_exception(e)
        return done


def dump(home: Path) -> dict[str, str]:
    """Every table of every SQLite file of `home`: its row count and a hash of its rows in order."""
    out = {}
    for db in sorted(home.glob("*.db")):
        conn = sqlite3.connect(db)
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        for t in tables:
            if t.startswith("sqlite_") or (t.startswith("chunk_fts_")):
                continue  # SQLite's own and FTS5's shadow tables (chunk_fts itself is compared)
            out[f"{db.name}:{t}"] = _table_digest(conn, t)
        conn.close()
    return out


def _table_digest(conn: sqlite3.Connection, table: str) -> str:
    """Row count and a hash of the rows (with the rowid, where the table has one) in order; a
    `version` column (a random token a space draws when its lists change) is left out."""
    names = [r[1] for r in conn.execute("SELECT * FROM pragma_table_info(?)", (table,)) if r[1] != "version"]
    cols, quoted = ", ".join(map(_identifier, names)), _identifier(table)
    # identifiers only (read from the file's own schema, quoted): no value is pasted
    try:
        cur = conn.execute(f"SELECT rowid, {cols} FROM {quoted}")  # noqa: S608
    except sqlite3.OperationalError:  # WITHOUT ROWID
        cur = conn.execute(f"SELECT {cols} FROM {quoted}")  # noqa: S608
    rows = sorted(cur.fetchall(), key=repr)
    h = hashlib.sha256()
    for row in rows:
        h.update(repr(row).encode())
    return f"{len(rows)} {h.hexdigest()[:16]}"


def _identifier(name: str) -> str:
    """An SQL identifier, quoted (a name with a quote or a keyword in it stays one name)."""
    return '"' + name.replace('"', '""') + '"'


def main() -> None:
    """Parse and run one command."""
    ap = argparse.ArgumentParser(prog="python -m bench.documents.store_profile")
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("--chunks", type=int, default=12000)
    m.add_argument("--batch", type=int, default=2000)
    m.add_argument("--out", type=Path, required=True)
    w = sub.add_parser("write")
    w.add_argument("batches", type=Path)
    w.add_argument("--home", type=Path, required=True)
    w.add_argument("--from", dest="first", type=int, default=0)
    w.add_argument("--count", type=int, default=None)
    w.add_argument("--base", type=Path, default=None)
    w.add_argument("--profile", type=Path, default=None)
    w.add_argument("--hold", choices=("none", "sources", "frozen"), default="none")
    d = sub.add_parser("dump")
    d.add_argument("home", type=Path)
    a = ap.parse_args()
    if a.cmd == "make":
        began = time.perf_counter()
        asyncio.run(make(a.chunks, a.batch, a.out))
        print(f"made in {time.perf_counter() - began:.1f} s")
    elif a.cmd == "write":
        print(json.dumps(asyncio.run(write(a.batches, a.home, a.first, a.count, a.base, a.profile, a.hold)), indent=1))
    else:
        print(json.dumps(dump(a.home), indent=1))


if __name__ == "__main__":
    main()
