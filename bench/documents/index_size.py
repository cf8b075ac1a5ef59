"""What an index costs on disk: `bytes_per_chunk` of an embedded home, by file and by table and
index (SQLite's dbstat), or of a Neo4j database, by label and relationship type (counts) and index.

    python -m bench index-size --home DIR [--json]
    python -m bench index-size --neo4j-url bolt://... --user U --collection C [--json]

The figures are what the files hold (dbstat's page sizes: free pages and the WAL left out), divided
by the chunks of the home (docs.db's `chunks` rows) — the figure every byte of the index must earn.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
from dataclasses import asdict, dataclass, field
from pathlib import Path

from processors.stores.neo4j.schema import Neo4jConnection

DB_FILES = ("docs.db", "graph.db", "vectors.db")


@dataclass
class FileSize:
    """One SQLite file: its bytes on disk (with WAL) and its tables' and indexes' bytes."""

    bytes_on_disk: int
    bytes_in_pages: int
    by_object: dict[str, int] = field(default_factory=dict)  # table or index name -> bytes


@dataclass
class HomeSize:
    """An embedded home's size per chunk."""

    chunks: int
    bytes_total: int
    bytes_per_chunk: float
    files: dict[str, FileSize]


def sqlite_objects(path: Path) -> dict[str, int]:
    """Bytes of each table and index of a SQLite file, largest first (FTS5 shadow tables apart)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC").fetchall()
    finally:
        conn.close()
    return {str(n): int(b) for n, b in rows}


def home_size(home: Path) -> HomeSize:
    """Measure an embedded home (its docs.db, graph.db and vectors.db and their WAL files)."""
    files: dict[str, FileSize] = {}
    for name in DB_FILES:
        path = home / name
        if not path.exists():
            continue
        on_disk = sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())
        objects = sqlite_objects(path)
        files[name] = FileSize(on_disk, sum(objects.values()), objects)
    chunks = _chunks(home / "docs.db")
    total = sum(f.bytes_in_pages for f in files.values())
    return HomeSize(chunks, total, round(total / chunks, 1) if chunks else 0.0, files)


def _chunks(docs: Path) -> int:
    if not docs.exists():
        return 0
    conn = sqlite3.connect(f"file:{docs}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
    finally:
        conn.close()


NEO4J_LABELS = (
    "MATCH (n) WHERE n.user = $user AND n.collection = $collection UNWIND labels(n) AS l RETURN l, count(*) AS n"
)
NEO4J_TYPES = "MATCH (a)-[r]->() WHERE a.user = $user AND a.collection = $collection RETURN type(r) AS t, count(*) AS n"
NEO4J_CHUNKS = "MATCH (c:KgChunk {user: $user, collection: $collection}) RETURN count(c) AS n"
NEO4J_STORE = "CALL dbms.queryJmx('org.neo4j:*') YIELD name, attributes RETURN name, attributes"


@dataclass
class Neo4jSize:
    """A Neo4j collection's nodes by label and relationships by type, and the database's indexes
    (Neo4j reports no bytes per label: `store_bytes` is the whole database's, when it says)."""

    chunks: int
    nodes_by_label: dict[str, int]
    relationships_by_type: dict[str, int]
    indexes: list[dict[str, object]]
    store_bytes: int | None
    bytes_per_chunk: float | None


async def neo4j_size(url: str, user: str, collection: str) -> Neo4jSize:
    """Count the collection's nodes and relationships and list the indexes (scoped by tenant)."""
    conn = Neo4jConnection(url)
    params = {"user": user, "collection": collection}
    try:
        labels = {r["l"]: int(r["n"]) for r in await conn.read(NEO4J_LABELS, params)}
        types = {r["t"]: int(r["n"]) for r in await conn.read(NEO4J_TYPES, params)}
        chunks = int((await conn.read(NEO4J_CHUNKS, params))[0]["n"])
        shown = await conn.read("SHOW INDEXES YIELD name, type, entityType, labelsOrTypes, properties", {})
        store = await _store_bytes(conn)
    finally:
        await conn.release()
    per = round(store / chunks, 1) if store and chunks else None
    return Neo4jSize(chunks, labels, types, [dict(r) for r in shown], store, per)


async def _store_bytes(conn: Neo4jConnection) -> int | None:
    """The database's total store size as Neo4j's JMX beans report it (None where they do not)."""
    try:
        rows = await conn.read(NEO4J_STORE, {})
    except Exception:  # noqa: BLE001 — JMX procedures are optional (disabled or not in this edition)
        return None
    for r in rows:
        attrs = r["attributes"] or {}
        total = attrs.get("TotalStoreSize") or attrs.get("totalStoreSize")
        if isinstance(total, dict) and isinstance(total.get("value"), int):
            return int(total["value"])
    return None


def render(size: HomeSize) -> str:
    """A table of the home's size: per file and per table or index, bytes and bytes per chunk."""
    n = max(size.chunks, 1)
    lines = [f"chunks {size.chunks}  total {size.bytes_total / 1e6:.1f} MB  bytes_per_chunk {size.bytes_per_chunk}"]
    for name, f in size.files.items():
        lines.append(f"{name}: {f.bytes_in_pages / 1e6:.1f} MB in pages, {f.bytes_on_disk / 1e6:.1f} MB on disk")
        lines += [f"  {obj:<32} {b / 1e6:9.2f} MB {b / n:10.0f} B/chunk" for obj, b in f.by_object.items()]
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    """Measure a home (or a Neo4j collection) and print the breakdown (as JSON with --json)."""
    ap = argparse.ArgumentParser(prog="python -m bench index-size", description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", type=Path, help="an embedded KGFLOW_HOME")
    ap.add_argument("--neo4j-url", help="measure a Neo4j collection instead")
    ap.add_argument("--user", default="default")
    ap.add_argument("--collection", default="default")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.neo4j_url:
        neo = asyncio.run(neo4j_size(args.neo4j_url, args.user, args.collection))
        print(json.dumps(asdict(neo), indent=1, default=str))
        return
    if args.home is None:
        ap.error("--home or --neo4j-url is needed")
    size = home_size(args.home)
    print(json.dumps(asdict(size), indent=1) if args.json else render(size))
