"""Neo4jConnection.read: one auto-commit query, retried on a retryable driver error only.

The driver is a fake here: a retryable failure (a leader switch, a dropped connection) cannot be
caused on demand against the real server; what a real read returns is covered by the store
contract tests on the real Neo4j.
"""

from __future__ import annotations

from typing import Any

import pytest
from neo4j.exceptions import ConfigurationError, ServiceUnavailable

from processors.stores.neo4j import schema as neo4j_schema
from processors.stores.neo4j.schema import READ_ATTEMPTS, Neo4jConnection


class _Result:
    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows

    def __aiter__(self) -> Any:
        async def gen() -> Any:
            for r in self.rows:
                yield r

        return gen()


class _Session:
    def __init__(self, driver: _Driver) -> None:
        self.driver = driver

    async def __aenter__(self) -> _Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def run(self, cypher: str, params: dict[str, Any]) -> _Result:
        self.driver.runs.append((cypher, params))
        if self.driver.failures:
            raise self.driver.failures.pop(0)
        return _Result([{"n": 1}])


class _Driver:
    def __init__(self, failures: list[Exception]) -> None:
        self.failures = failures
        self.runs: list[tuple[str, dict[str, Any]]] = []
        self.modes: list[str] = []

    def session(self, database: str | None = None, default_access_mode: str = "WRITE") -> _Session:
        self.modes.append(default_access_mode)
        return _Session(self)


def _connection(driver: _Driver, monkeypatch: pytest.MonkeyPatch) -> Neo4jConnection:
    monkeypatch.setattr(neo4j_schema, "READ_RETRY_DELAY_S", 0.0)
    conn = Neo4jConnection("bolt://unused:1")
    conn._driver, conn._ready = driver, True
    return conn


async def test_a_retryable_error_is_retried_and_the_read_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = _Driver([ServiceUnavailable("leader switched")])
    rows = await _connection(driver, monkeypatch).read("RETURN 1 AS n", {"x": 1})
    assert rows == [{"n": 1}]
    assert len(driver.runs) == 2
    assert driver.modes == ["READ", "READ"]  # routed as reads (followers in a cluster)


async def test_a_non_retryable_error_is_raised_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = _Driver([ConfigurationError("bad database")])
    with pytest.raises(ConfigurationError):
        await _connection(driver, monkeypatch).read("RETURN 1 AS n", {})
    assert len(driver.runs) == 1


async def test_retries_stop_after_the_last_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = _Driver([ServiceUnavailable(f"down {i}") for i in range(READ_ATTEMPTS + 1)])
    with pytest.raises(ServiceUnavailable, match=f"down {READ_ATTEMPTS - 1}"):
        await _connection(driver, monkeypatch).read("RETURN 1 AS n", {})
    assert len(driver.runs) == READ_ATTEMPTS
