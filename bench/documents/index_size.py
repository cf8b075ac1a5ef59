"""What an index costs on disk: `bytes_per_chunk` of an embedded home, by file and by table and
index (SQLite's dbstat), or of a Neo4j database, by label and relationship type (counts) and index.

    python -m bench index-size --home DIR [--json]
    python -m bench index-size --neo4j-url bolt://... --user U --collection C [--neo4j-database-dir DIR]

The figures are what the files hold (dbstat's page sizes: free pages and the WAL left out), divided
by the chunks of the home (docs.db's `chunks` rows) — the figure every byte of the index must earn.
On Neo4j: the database directory's store files and index directories over the database's chunks,
and each label's and relationship type's share estimated from record sizes (see `record_bytes`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sqlite3
from dataclasses import asdict, dataclass, field
from pathlib import Path

from processors.stores.neo4j.schema import Neo4jConnection

DB_FILES = ("docs.db", "graph.db", "vectors.db")
RESIDENT = "resident copies (*.faiss)"


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
    """Measure an embedded home (its docs.db, graph.db and vectors.db and their WAL files, and the
    resident copies of its large vector spaces)."""
    files: dict[str, FileSize] = {}
    for name in DB_FILES:
        path = home / name
        if not path.exists():
            continue
        on_disk = sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())
        objects = sqlite_objects(path)
        files[name] = FileSize(on_disk, sum(objects.values()), objects)
    copies = {p.name: p.stat().st_size for p in sorted(home.glob("*.db.resident-*.faiss"))}
    if copies:  # large spaces' lists as faiss PQ codes (processors/stores/sqlite/resident_lists.py), derived
        files[RESIDENT] = FileSize(sum(copies.values()), sum(copies.values()), copies)
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


NEO4J_STORE = "CALL dbms.queryJmx('org.neo4j:*') YIELD name, attributes RETURN name, attributes"
NEO4J_LABELS = (
    "MATCH (n) WHERE n.user = $user AND n.collection = $collection UNWIND labels(n) AS l RETURN l, count(*) AS n"
)
NEO4J_TYPES = "MATCH (a)-[r]->() WHERE a.user = $user AND a.collection = $collection RETURN type(r) AS t, count(*) AS n"
NEO4J_CHUNKS = "MATCH (c:KgChunk {user: $user, collection: $collection}) RETURN count(c) AS n"
ALL_CHUNKS = "MATCH (c:KgChunk) RETURN count(c) AS n"  # the count store answers: no scan
# A sample of one label's nodes (one relationship type's relationships) of the collection: their properties.
SAMPLE_NODES = (
    "MATCH (n) WHERE n.user = $user AND n.collection = $collection AND $label IN labels(n) "
    "WITH n LIMIT $n RETURN properties(n) AS p"
)
SAMPLE_RELS = (
    "MATCH (a)-[r]->() WHERE a.user = $user AND a.collection = $collection AND type(r) = $type "
    "WITH r LIMIT $n RETURN properties(r) AS p"
)
SAMPLE = 200
# Record sizes of Neo4j 5's record store format (community: `aligned`): a node, a relationship, a
# property record (4 blocks of 8 bytes), a dynamic string or array record (120 bytes of data).
NODE_RECORD, REL_RECORD, PROPERTY_RECORD, BLOCKS_PER_RECORD, DYNAMIC_RECORD, DYNAMIC_DATA = 15, 34, 41, 4, 128, 120
INLINE_STRING = 24  # a string up to about this many bytes is kept in its property's blocks
INLINE_HEX = 54  # a string of hex digits: up to this many
HEX_DIGITS = re.compile("[0-9a-f]+")
# Store files by kind (the rest: token stores, counts, id files, metadata).
STORE_KINDS = {
    "neostore.nodestore.db": "nodes",
    "neostore.nodestore.db.labels": "nodes",
    "neostore.relationshipstore.db": "relationships",
    "neostore.relationshipgroupstore.db": "relationships",
    "neostore.relationshipgroupstore.degrees.db": "relationships",
    "neostore.propertystore.db": "properties",
    "neostore.propertystore.db.strings": "strings",
    "neostore.propertystore.db.arrays": "arrays",
}


@dataclass
class Neo4jSize:
    """A Neo4j collection's nodes by label and relationships by type with their estimated record
    bytes, and, with the database directory, the bytes on disk by store kind and by index."""

    chunks: int
    nodes_by_label: dict[str, int]
    relationships_by_type: dict[str, int]
    indexes: list[dict[str, object]]
    store_bytes: int | None
    bytes_per_chunk: float | None
    database_chunks: int = 0  # every collection's: what the shared files are divided by
    last_checkpoint: str | None = None  # the files hold what it flushed (Community checkpoints every 15 min)
    store_bytes_by_kind: dict[str, int] = field(default_factory=dict)
    index_bytes: dict[str, int] = field(default_factory=dict)
    estimated_bytes_by_label: dict[str, int] = field(default_factory=dict)
    estimated_bytes_by_type: dict[str, int] = field(default_factory=dict)
    method: str = ""


def record_bytes(props: dict[str, object], record: int) -> int:
    """Estimated store bytes of one node or relationship: its record, its property records (a
    property takes a block, a short string up to 3) and the dynamic records of long strings and of
    arrays (a list of floats: 8 bytes a value, as the driver sends Python floats)."""
    blocks, dynamic = 0, 0
    for v in props.values():
        blocks += 1
        if isinstance(v, str):
            n = len(v.encode())
            if HEX_DIGITS.fullmatch(v) and n <= INLINE_HEX:  # 4 bits a digit (a relation's key)
                blocks += (4 * n + 36) // 64
            elif n > INLINE_STRING:
                dynamic += -(-n // DYNAMIC_DATA)
            else:
                blocks += n // 8
        elif isinstance(v, list):
            n = sum(8 if not isinstance(x, str) else len(x.encode()) + 4 for x in v) + 8
            dynamic += -(-n // DYNAMIC_DATA)
    return record + -(-blocks // BLOCKS_PER_RECORD) * PROPERTY_RECORD + dynamic * DYNAMIC_RECORD


def deployed_database_dir() -> Path:
    """Where the Neo4j that deploy/servers.py runs keeps its database (under KGFLOW_SERVERS_HOME)."""
    servers = Path(os.environ.get("KGFLOW_SERVERS_HOME") or "~/.cache/kgflow/servers").expanduser()
    return servers / "neo4j" / "run" / "data" / "databases" / "neo4j"


def disk_bytes(database_dir: Path, index_names: dict[int, str]) -> tuple[dict[str, int], dict[str, int]]:
    """Bytes on disk of a database directory: store files by kind, and each index's directory
    (`schema/index/<provider>/<id>`) by the index's name."""
    kinds: dict[str, int] = {}
    for f in database_dir.iterdir():
        if f.is_file() and ".tmp" not in f.name:  # (an id buffer the server writes while it runs)
            kind = STORE_KINDS.get(f.name, "other")
            kinds[kind] = kinds.get(kind, 0) + f.stat().st_size
    indexes: dict[str, int] = {}
    for d in sorted((database_dir / "schema" / "index").glob("*/*")):
        name = index_names.get(int(d.name), d.name) if d.name.isdigit() else d.name
        indexes[name] = sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
    return kinds, indexes


async def neo4j_size(url: str, user: str, collection: str, database_dir: Path | None = None) -> Neo4jSize:
    """Count the collection's nodes and relationships, estimate their record bytes from a sample,
    list the indexes and, with `database_dir`, measure the files (see bench/README.md)."""
    conn = Neo4jConnection(url)
    params = {"user": user, "collection": collection}
    try:
        labels = {r["l"]: int(r["n"]) for r in await conn.read(NEO4J_LABELS, params)}
        types = {r["t"]: int(r["n"]) for r in await conn.read(NEO4J_TYPES, params)}
        chunks = int((await conn.read(NEO4J_CHUNKS, params))[0]["n"])
        everyone = int((await conn.read(ALL_CHUNKS, {}))[0]["n"])
        shown = await conn.read("SHOW INDEXES YIELD id, name, type, entityType, labelsOrTypes, properties", {})
        by_label = {x: await _estimate(conn, SAMPLE_NODES, {**params, "label": x}, n, NODE_RECORD)
                    for x, n in labels.items()}  # fmt: skip
        by_type = {
            x: await _estimate(conn, SAMPLE_RELS, {**params, "type": x}, n, REL_RECORD) for x, n in types.items()
        }
        store = await _store_bytes(conn)
    finally:
        await conn.release()
    size = Neo4jSize(chunks, labels, types, [dict(r) for r in shown], store, None, everyone,
                     estimated_bytes_by_label=by_label, estimated_bytes_by_type=by_type)  # fmt: skip
    if database_dir is not None:
        size.store_bytes_by_kind, size.index_bytes = disk_bytes(database_dir, {int(r["id"]): r["name"] for r in shown})
        size.last_checkpoint = last_checkpoint(database_dir)
        size.store_bytes = sum(size.store_bytes_by_kind.values()) + sum(size.index_bytes.values())
        size.method = (
            "bytes_per_chunk: the database directory's store files and index directories (transaction logs "
            "apart) over every chunk in the database (all collections share the files); by label and type: "
            f"counts x record bytes estimated from {SAMPLE} sampled records of this collection"
        )
    elif store:
        size.method = "bytes_per_chunk: the JMX store size over every chunk in the database"
    size.bytes_per_chunk = round(size.store_bytes / everyone, 1) if size.store_bytes and everyone else None
    return size


def last_checkpoint(database_dir: Path) -> str | None:
    """When the database last completed a checkpoint (from the server's debug.log, beside `data/`):
    the store files hold what was written before it (the rest is in the transaction log)."""
    log = database_dir.parents[2] / "logs" / "debug.log"
    if not log.exists():
        return None
    tag = f"[{database_dir.name}/"
    done = [x for x in log.read_text(errors="replace").splitlines() if tag in x and "checkpoint completed" in x]
    return done[-1][:28] if done else None


async def _estimate(conn: Neo4jConnection, query: str, params: dict[str, object], count: int, record: int) -> int:
    """`count` records' estimated bytes, from the mean of a sample's (`record_bytes`)."""
    rows = await conn.read(query, {**params, "n": SAMPLE})
    if not rows:
        return 0
    return round(count * sum(record_bytes(r["p"], record) for r in rows) / len(rows))


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
    ap.add_argument(
        "--neo4j-database-dir",
        type=Path,
        default=None,
        help="the database's directory (data/databases/neo4j under the server's home; the deploy's: "
        f"{deployed_database_dir()}): its bytes on disk",
    )
    ap.add_argument("--user", default="default")
    ap.add_argument("--collection", default="default")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.neo4j_url:
        neo = asyncio.run(neo4j_size(args.neo4j_url, args.user, args.collection, args.neo4j_database_dir))
        print(json.dumps(asdict(neo), indent=1, default=str))
        return
    if args.home is None:
        ap.error("--home or --neo4j-url is needed")
    size = home_size(args.home)
    print(json.dumps(asdict(size), indent=1) if args.json else render(size))
