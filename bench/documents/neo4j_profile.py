"""The store side of a corpus build on Neo4j alone (issue 38 item 2: Neo4j >= 500 chunks/s store
side): batches made once by `store_profile make`, written into a collection of the running Neo4j
exactly as the build writes them (`DirectWriter.write`: claim, entity vectors, triples, records),
with the time split three ways: this process's CPU, the Neo4j server's CPU (from /proc), and the
wall time of each statement and of each transaction's commit.

    python -m bench.documents.store_profile make --chunks 4000 --batch 500 --out BATCHES_DIR
    python -m bench.documents.neo4j_profile write BATCHES_DIR --collection C [--from 0 --count 4]
    python -m bench.documents.neo4j_profile dump --collection C  # rows by label and type, hashed

`write` drops the collection first (every store: only `C` and its marker collection, of the
bench's user), so never name a collection someone else uses. `dump` hashes every node and
relationship of the collection (keys, properties, vectors) to compare what two versions of the
store code write.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bench.documents.corpus import USER, DirectWriter
from bench.documents.store_profile import _load, write_summary
from bench.documents.stores import _drop, store_settings
from bench.harness.servers import server_pids
from bench.harness.stats import load_average
from processors.stores.factory import open_stores
from processors.stores.neo4j import schema as neo4j_schema

LABELS = ("KgEntity", "KgLiteral", "KgPredicate", "KgVectorModel", "KgDocument", "KgChunk", "KgRelation",
          "KgTerm", "KgName", "KgSpelling", "KgCollectionStats", "KgCommunity")  # fmt: skip


def neo4j_cpu_s() -> float:
    """The Neo4j server's CPU seconds so far (user + system), 0 when it is not ours to see."""
    pid = server_pids().get("neo4j")
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _time_statements(into: defaultdict[str, float]) -> None:
    """Add each statement's wall seconds (by its first 60 characters, until its result is read)
    and each managed transaction's commit (its wall time less its statements') to `into`."""
    plain_tx = neo4j_schema.Neo4jConnection._transaction
    in_statements, first = [0.0], [""]

    async def transaction(self: Any, work: Any, write: bool) -> Any:
        async def timed_work(tx: Any) -> Any:
            in_statements[0] = 0.0  # a retried transaction starts again
            return await work(_TimedTx(tx, into, in_statements, first))

        t = time.perf_counter()
        try:
            return await plain_tx(self, timed_work, write)
        finally:
            into["(commit) " + first[0][:40]] += time.perf_counter() - t - in_statements[0]

    neo4j_schema.Neo4jConnection._transaction = transaction  # type: ignore[method-assign]


class _TimedTx:
    """A transaction whose statements are timed from `run` until their result is read."""

    def __init__(self, tx: Any, into: defaultdict[str, float], in_statements: list[float], first: list[str]) -> None:
        self.tx, self.into, self.in_statements, self.first = tx, into, in_statements, first
        first[0] = ""

    async def run(self, cypher: str, params: Any) -> _TimedResult:
        self.first[0] = self.first[0] or cypher
        t = time.perf_counter()
        return _TimedResult(await self.tx.run(cypher, params), cypher[:60], t, self)

    def add(self, name: str, since: float) -> None:
        spent = time.perf_counter() - since
        self.into[name] += spent
        self.in_statements[0] += spent


class _TimedResult:
    """A statement's result: reading it (consume, data) stops its timer."""

    def __init__(self, result: Any, name: str, since: float, tx: _TimedTx) -> None:
        self.result, self.name, self.since, self.tx = result, name, since, tx

    async def consume(self) -> Any:
        try:
            return await self.result.consume()
        finally:
            self.tx.add(self.name, self.since)

    async def data(self) -> list[dict[str, Any]]:
        try:
            return await self.result.data()
        finally:
            self.tx.add(self.name, self.since)


async def write(path: Path, collection: str, first: int, count: int | None, statements: bool) -> dict[str, Any]:
    """Write batches `first` .. `first + count - 1` into `collection` (dropped first)."""
    chosen: list[Any] = _load(path, first, count)
    spent: defaultdict[str, float] = defaultdict(float)
    if statements:
        _time_statements(spent)
    with tempfile.TemporaryDirectory() as home:
        stores = open_stores(store_settings("neo4j", Path(home)))
        try:
            await _drop(SimpleNamespace(stores=stores), collection)  # type: ignore[arg-type]
            spent.clear()
            server_by_call = _time_calls(stores)
            writer = DirectWriter(stores, collection, SimpleNamespace(label_vectors={}))  # type: ignore[arg-type]
            load, cpu, server = load_average(), time.process_time(), neo4j_cpu_s()
            written = 0
            for b in chosen:
                await writer.write(b)
                written += len(b.linked.records)
            cpu, server = time.process_time() - cpu, neo4j_cpu_s() - server
        finally:
            await stores.close()
    return {
        **write_summary(writer, written),
        "this_process_cpu_s": round(cpu, 2),
        "neo4j_cpu_s": round(server, 2),
        "load_average": {"start": load, "end": load_average()},
        "neo4j_cpu_s_by_call": {k: round(v, 2) for k, v in server_by_call.items()},
        "statement_wall_s": {k: round(v, 3) for k, v in sorted(spent.items(), key=lambda kv: -kv[1])[:25]},
    }


def _time_calls(stores: Any) -> dict[str, float]:
    """Wrap the store calls a write makes so each adds the Neo4j server CPU spent during it."""
    out: dict[str, float] = defaultdict(float)
    for store, name in ((stores.documents, "claim"), (stores.documents, "store"), (stores.entities, "upsert"),
                        (stores.triples, "add_triples")):  # fmt: skip
        plain = getattr(store, name)

        async def timed(*args: Any, _plain: Any = plain, _name: str = name, **kwargs: Any) -> Any:
            before = neo4j_cpu_s()
            try:
                return await _plain(*args, **kwargs)
            finally:
                out[_name] += neo4j_cpu_s() - before

        setattr(store, name, timed)
    return out


NODES = "MATCH (n:{label}) WHERE n.user = $user AND n.collection = $collection RETURN n.key AS key, properties(n) AS p"
RELATIONSHIPS = (
    "MATCH (n:{label})-[r]->(m) WHERE n.user = $user AND n.collection = $collection "
    "RETURN type(r) AS type, n.key AS a, coalesce(m.key, elementId(m)) AS b, properties(r) AS p"
)


async def dump(collection: str) -> dict[str, str]:
    """Per label and per relationship type of the collection: count and a hash of the rows in order."""
    with tempfile.TemporaryDirectory() as home:
        stores = open_stores(store_settings("neo4j", Path(home)))
        conn = stores.documents.conn  # type: ignore[attr-defined]
        params = {"user": USER, "collection": collection}
        rows: dict[str, list[str]] = defaultdict(list)
        try:
            for label in LABELS:  # a label name from the list above, never from input
                for r in await conn.read(NODES.replace("{label}", label), params):
                    rows[label].append(json.dumps([r["key"], r["p"]], sort_keys=True, default=str))
                for r in await conn.read(RELATIONSHIPS.replace("{label}", label), params):
                    rows[f"{label}-[{r['type']}]->"].append(json.dumps([r["a"], r["b"], r["p"]], sort_keys=True))
        finally:
            await stores.close()
    return {
        k: f"{len(v)} {hashlib.sha256(''.join(sorted(v)).encode()).hexdigest()[:16]}" for k, v in sorted(rows.items())
    }


def main() -> None:
    """Parse and run one command."""
    ap = argparse.ArgumentParser(prog="python -m bench.documents.neo4j_profile")
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("batches", type=Path)
    w.add_argument("--collection", required=True)
    w.add_argument("--from", dest="first", type=int, default=0)
    w.add_argument("--count", type=int, default=None)
    w.add_argument("--no-statements", action="store_true", help="no per-statement timers")
    d = sub.add_parser("dump")
    d.add_argument("--collection", required=True)
    a = ap.parse_args()
    if a.cmd == "write":
        result = asyncio.run(write(a.batches, a.collection, a.first, a.count, not a.no_statements))
    else:
        result = asyncio.run(dump(a.collection))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
