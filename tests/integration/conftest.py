"""Fixtures shared by the integration suites (the store backends live in store_fixtures.py and
doc_store_fixtures.py)."""

from __future__ import annotations

from tests.integration.doc_store_fixtures import docs
from tests.integration.store_fixtures import cassandra_conn, store

__all__ = ["cassandra_conn", "docs", "store"]
