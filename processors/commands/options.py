"""Options every command shares (stores, bus) and the settings they build."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from processors.base.settings import LOG_LEVELS, RuntimeSettings, from_env
from processors.stores.settings import StoreSettings


def store_args(p: argparse.ArgumentParser) -> None:
    """Store options (each also an environment variable KGFLOW_<NAME>)."""
    g = p.add_argument_group("stores (env KGFLOW_<NAME>)")
    g.add_argument("--home", type=Path, help="embedded data directory (default ./.kgflow)")
    g.add_argument("--triples-backend", choices=["sqlite", "cassandra", "neo4j"])
    g.add_argument("--vectors-backend", choices=["local", "neo4j", "cassandra"])
    g.add_argument("--documents-backend", choices=["sqlite", "neo4j"])
    g.add_argument("--cassandra-hosts")
    g.add_argument("--cassandra-keyspace")
    g.add_argument("--neo4j-url")


def bus_args(p: argparse.ArgumentParser) -> None:
    """Bus and process options."""
    g = p.add_argument_group("bus")
    g.add_argument("--pulsar", metavar="URL", help="use Pulsar at URL instead of the in-process bus")
    g.add_argument("--concurrency", type=int, help="requests in flight per processor")
    g.add_argument("--metrics-port", type=int, help="serve Prometheus /metrics on this port")
    g.add_argument("--metrics-host", help="address /metrics listens on (default 127.0.0.1; 0.0.0.0 in containers)")
    g.add_argument("--log-level", type=str.upper, choices=LOG_LEVELS, help="default WARNING")
    g.add_argument("--log-format", choices=["auto", "text", "json"], help="auto: text on a terminal, else JSON lines")


def store_settings(a: argparse.Namespace) -> StoreSettings:
    """Store settings from the environment, then the command line."""
    keys = (
        "home",
        "triples_backend",
        "vectors_backend",
        "documents_backend",
        "cassandra_hosts",
        "cassandra_keyspace",
        "neo4j_url",
    )
    return from_env(StoreSettings, {k: getattr(a, k, None) for k in keys})


def runtime_settings(a: argparse.Namespace) -> RuntimeSettings:
    """Runtime settings from the environment, then the command line."""
    keys = ("concurrency", "metrics_port", "metrics_host", "log_level", "log_format")
    over: dict[str, Any] = {k: getattr(a, k, None) for k in keys}
    if getattr(a, "pulsar", None):
        over.update(bus="pulsar", pulsar_url=a.pulsar)
    return from_env(RuntimeSettings, over)
