"""Where a process's stores live: the backends of triples, entity vectors and documents, and how to
reach the servers (environment: KGFLOW_<FIELD>, read by the framework's `from_env`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel


class StoreSettings(BaseModel):
    """Where triples and entity vectors live."""

    home: Path = Path(".kgflow")
    triples_backend: Literal["sqlite", "cassandra", "neo4j"] = "sqlite"
    vectors_backend: Literal["local", "neo4j", "cassandra"] = "local"
    documents_backend: Literal["sqlite", "neo4j"] = "sqlite"  # documents, chunks, communities
    cassandra_hosts: str = "127.0.0.1"
    cassandra_port: int = 9042
    cassandra_keyspace: str = "kgflow"
    neo4j_url: str = "bolt://127.0.0.1:7687"
    neo4j_user: str = "neo4j"
    neo4j_password: str = ""
