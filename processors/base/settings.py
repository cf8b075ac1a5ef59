"""Typed process settings (environment: KGFLOW_<FIELD>).

Every default is written once: a process setting here, a flow parameter in its service's
parameter model (e.g. `GraphRagSettings`, `LabelParams`, `LLMParams`), a gateway setting in
`GatewaySettings`. Constructors take these objects instead of repeating their defaults.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


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


class RuntimeSettings(BaseModel):
    """How a processor process talks to the bus and reports."""

    bus: Literal["memory", "pulsar"] = "memory"
    pulsar_url: str = "pulsar://127.0.0.1:6650"
    concurrency: int = 16
    request_timeout_s: float = 60.0
    max_redeliveries: int = 3
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"  # 0.0.0.0 inside containers, so Prometheus can scrape
    log_level: str = "WARNING"


def from_env(model: type[M], overrides: dict[str, Any] | None = None, prefix: str = "KGFLOW_") -> M:
    """Build `model` from KGFLOW_<FIELD> environment variables, then explicit overrides."""
    data: dict[str, Any] = {}
    for name in model.model_fields:
        env = os.environ.get(prefix + name.upper())
        if env is not None and env != "":
            data[name] = env
    data.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return model.model_validate(data)


def flow_params(model: type[M], parameters: dict[str, Any]) -> M:
    """A processor's typed view of its flow parameters (kebab-case names accepted; others ignored)."""
    norm = {k.replace("-", "_"): v for k, v in parameters.items()}
    return model.model_validate({k: v for k, v in norm.items() if k in model.model_fields})
