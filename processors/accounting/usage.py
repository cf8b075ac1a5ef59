"""What a request cost the stores, counted where each backend talks to its store.

The framework gives every request it handles a fresh `StoreUsage` (a context variable, so the
handler's own tasks share it and concurrent requests never mix), and each backend's connection
layer adds to it:

- `requests`: what reached the store. SQLite: each statement batch a read or write runs (each
  `execute`, `executemany` however many rows, `executescript`; not the BEGIN/COMMIT the sqlite3
  module adds around a write). Cassandra: each request sent (each `execute_async` of a prepared
  statement, and each further result page fetched). Neo4j: each Cypher statement (an auto-commit
  query, or each statement of a managed transaction, again for each attempt the driver makes).
- `round_trips`: each call into a backend's connection layer that the caller waited on: a SQLite
  pool read or write (its statements run back to back in one worker thread), a Cassandra `run` or
  `run_many` (its requests in flight together), a Neo4j query or transaction.

Connecting, creating the schema and preparing statements (once per process) are not counted. A
service that calls another over the bus adds what the callee reports (a response property, see
`processors.base.client`), so a retrieval service's count includes its stages' stores.
Counts are only ever changed on the event loop's thread (SQLite's worker threads report back).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass
class StoreUsage:
    """Store requests and round trips of one request."""

    requests: int = 0
    round_trips: int = 0

    def copy(self) -> StoreUsage:
        """These counts as they are now."""
        return StoreUsage(self.requests, self.round_trips)

    def since(self, earlier: StoreUsage) -> StoreUsage:
        """What was counted after `earlier` (a copy taken before)."""
        return StoreUsage(self.requests - earlier.requests, self.round_trips - earlier.round_trips)

    def add(self, other: StoreUsage) -> None:
        """Add another request's counts (what a called service reported)."""
        self.requests += other.requests
        self.round_trips += other.round_trips

    def to_property(self) -> str:
        """The counts as a message property value: `requests,round_trips`."""
        return f"{self.requests},{self.round_trips}"

    @classmethod
    def from_property(cls, value: str) -> StoreUsage | None:
        """Counts from a message property (None when it does not parse)."""
        try:
            requests, round_trips = (int(x) for x in value.split(","))
        except ValueError:
            return None
        return cls(max(requests, 0), max(round_trips, 0))


_CURRENT: ContextVar[StoreUsage | None] = ContextVar("kgflow_store_usage", default=None)


def current() -> StoreUsage | None:
    """The counter of the request being served here (None: nobody is counting)."""
    return _CURRENT.get()


def count(usage: StoreUsage | None, requests: int, round_trips: int = 0) -> None:
    """Add to `usage` (a request's counter taken with `current()`; None: not counted)."""
    if usage is not None:
        usage.requests += requests
        usage.round_trips += round_trips


def begin() -> StoreUsage:
    """A fresh counter for the request the current task serves (until the task ends)."""
    usage = StoreUsage()
    _CURRENT.set(usage)
    return usage


class Reporting:
    """A request's counter and how much of it its response frames have reported so far."""

    def __init__(self, usage: StoreUsage) -> None:
        self.usage = usage
        self.sent = StoreUsage()

    def news(self) -> StoreUsage | None:
        """What was counted since the previous frame (None: nothing)."""
        news = self.usage.since(self.sent)
        if not news.requests and not news.round_trips:
            return None
        self.sent = self.usage.copy()
        return news


@contextlib.contextmanager
def counting() -> Iterator[StoreUsage]:
    """Count the store requests made inside the block (and its tasks) into a fresh counter."""
    usage = StoreUsage()
    token = _CURRENT.set(usage)
    try:
        yield usage
    finally:
        _CURRENT.reset(token)
