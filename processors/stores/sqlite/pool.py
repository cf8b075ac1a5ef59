"""Run SQLite work off the event loop: a few threads, one connection each (WAL)."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from processors.accounting.usage import count, current
from schemas.tenant import Tenant

T = TypeVar("T")

# Map the file: every connection reads the OS page cache directly instead of warming a private cache.
MMAP_BYTES = 8 << 30
CACHE_KIB = 65536  # each connection's private page cache (without the map)


# The tables whose rows a collection delete removes, each with its constant statement (a table name
# is never taken from a caller into query text). graph.db's triples and labels are keyed by a scope
# number: its store deletes them itself.
_TENANT_TABLES = (
    "load_state", "vectors", "scope_version", "vector_model",
    "communities", "community_members", "community_chunks", "community_pending",
)  # fmt: skip
TENANT_DELETES = {t: "DELETE FROM " + t + " WHERE user = ? AND collection = ?" for t in _TENANT_TABLES}


def delete_tenant_rows(conn: sqlite3.Connection, tenant: Tenant, tables: Iterable[str]) -> None:
    """Delete the tenant's rows from each of `tables` (one of `TENANT_DELETES`' tables)."""
    for table in tables:
        conn.execute(TENANT_DELETES[table], (tenant.user, tenant.collection))


class CountedConnection(sqlite3.Connection):
    """A connection that counts the statement batches run on it (`processors.accounting.usage`)."""

    statements = 0

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        self.statements += 1
        return super().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> sqlite3.Cursor:
        self.statements += 1
        return super().executemany(sql, parameters)

    def executescript(self, sql: str, /) -> sqlite3.Cursor:
        self.statements += 1
        return super().executescript(sql)


class SqlitePool:
    """Thread-local connections to one database file; writes are serialized."""

    def __init__(
        self,
        path: Path,
        schema: str,
        threads: int = 4,
        migrate: Callable[[sqlite3.Connection], None] | None = None,
        mapped: bool = True,
    ) -> None:
        """`mapped`: read through a memory map (fast; the pages a process touches count in its RSS)
        or through SQLite's own small cache (the file stays in the OS page cache, outside the process)."""
        self.path = path
        self.mapped = mapped
        path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._write_lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=f"sqlite-{path.stem}")
        conn = self._conn()
        with self._write_lock:
            if migrate is not None:
                with conn:
                    migrate(conn)  # before the schema, whose indexes may need the new columns
            conn.executescript(schema)

    def ensure_schema(self, schema: str) -> None:
        """Create what `schema` declares, if missing (a second store sharing this file)."""
        conn = self._conn()
        with self._write_lock:
            conn.executescript(schema)

    def _conn(self) -> CountedConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, check_same_thread=False, factory=CountedConnection)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(f"PRAGMA cache_size=-{CACHE_KIB if self.mapped else CACHE_KIB // 4}")
            conn.execute(f"PRAGMA mmap_size={MMAP_BYTES if self.mapped else 0}")
            self._local.conn = conn
            self._conns.append(conn)
        return conn

    @contextlib.contextmanager
    def writer(self) -> Iterator[sqlite3.Connection]:
        """A blocking write transaction on this thread (for setup, before the event loop serves)."""
        conn = self._conn()
        with self._write_lock, conn:
            yield conn

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn(conn)` in a worker thread."""
        return await self._run(fn, write=False)

    async def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn(conn)` in a worker thread inside one transaction, one writer at a time."""
        return await self._run(fn, write=True)

    async def _run(self, fn: Callable[[sqlite3.Connection], T], write: bool) -> T:
        """`fn(conn)` in a worker thread; its statements and this round trip go to the request's
        counter (on the event loop: the worker only reports how many it ran)."""
        usage = current()
        ran = [0]

        def work() -> T:
            conn = self._conn()
            before = conn.statements
            try:
                if not write:
                    return fn(conn)
                with self._write_lock, conn:
                    return fn(conn)
            finally:
                ran[0] = conn.statements - before

        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, work)
        finally:
            count(usage, ran[0], 1)

    async def close(self) -> None:
        """Close every connection."""
        self._pool.shutdown(wait=True)
        for c in self._conns:
            c.close()


def has_table(conn: sqlite3.Connection, name: str) -> bool:
    """Whether the file holds a table of this name (what an on-open migration asks first)."""
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone() is not None
