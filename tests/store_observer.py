"""What the stores were really asked, observed from outside kgflow's counters: a test compares it
with what a request reports (`processors.accounting.usage`).

- Store calls (round trips): every call into a backend's connection layer (a SQLite pool read or
  write, a Cassandra `run` / `run_many` with requests, a Neo4j query or transaction).
- Requests: SQLite statements as the engine traces them, but those it runs on its own inside one
  of ours (a full-text index's reads of its shadow tables; reads only: a write's BEGIN/COMMIT and
  each row of an executemany are traced too), each `execute_async` and further page the Cassandra
  driver is asked for, each Cypher statement the Neo4j driver runs (an auto-commit query, or a
  statement of a managed transaction).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

import pytest

from processors.stores.sqlite.pool import SqlitePool


@dataclass
class Observed:
    """Counts seen at the drivers since observing began."""

    calls: int = 0
    requests: int = 0


def observe_stores(monkeypatch: pytest.MonkeyPatch) -> Observed:
    """Count, process-wide, every store call and every request the drivers send from now on."""
    seen = Observed()
    _observe_sqlite(monkeypatch, seen)
    _observe_cassandra(monkeypatch, seen)
    _observe_neo4j(monkeypatch, seen)
    return seen


def _wrap_calls(monkeypatch: pytest.MonkeyPatch, cls: type, name: str, seen: Observed) -> None:
    original = getattr(cls, name)

    async def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if name != "run_many" or args[0]:  # an empty run_many sends nothing
            seen.calls += 1
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(cls, name, call)


def _observe_sqlite(monkeypatch: pytest.MonkeyPatch, seen: Observed) -> None:
    _wrap_calls(monkeypatch, SqlitePool, "_run", seen)
    traced: set[int] = set()
    original = SqlitePool._conn

    def traced_conn(self: SqlitePool) -> sqlite3.Connection:
        conn = original(self)
        if id(conn) not in traced:
            traced.add(id(conn))

            def statement(sql: str) -> None:
                if sql not in ("BEGIN ", "COMMIT") and not _engine_own(sql):
                    seen.requests += 1

            conn.set_trace_callback(statement)
        return conn

    monkeypatch.setattr(SqlitePool, "_conn", traced_conn)


def _engine_own(sql: str) -> bool:
    """A statement SQLite runs on its own inside one of ours: a nested one (traced as `-- ...`) or
    one a full-text index prepares on its shadow tables (always schema-qualified, `'main'.`,
    which kgflow's SQL never is)."""
    return sql.startswith("-- ") or "'main'." in sql


def _observe_cassandra(monkeypatch: pytest.MonkeyPatch, seen: Observed) -> None:
    from cassandra.cluster import ResponseFuture, Session

    from processors.stores.cassandra.schema import CassandraConnection

    for name in ("run", "run_many"):
        _wrap_calls(monkeypatch, CassandraConnection, name, seen)
    send, more = Session.execute_async, ResponseFuture.start_fetching_next_page

    def execute_async(self: Any, *args: Any, **kwargs: Any) -> Any:
        seen.requests += 1
        return send(self, *args, **kwargs)

    def next_page(self: Any) -> Any:
        seen.requests += 1
        return more(self)

    monkeypatch.setattr(Session, "execute_async", execute_async)
    monkeypatch.setattr(ResponseFuture, "start_fetching_next_page", next_page)


def _observe_neo4j(monkeypatch: pytest.MonkeyPatch, seen: Observed) -> None:
    from neo4j import AsyncManagedTransaction, AsyncSession

    from processors.stores.neo4j.schema import Neo4jConnection

    for name in ("read", "write", "read_tx", "write_tx", "autocommit"):
        _wrap_calls(monkeypatch, Neo4jConnection, name, seen)
    for cls in (AsyncSession, AsyncManagedTransaction):  # an auto-commit query; a transaction's statement
        original = cls.run

        async def statement(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            seen.requests += 1
            return await _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "run", statement)
