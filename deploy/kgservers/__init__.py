"""Stdlib-only launcher of real Pulsar, Cassandra and Neo4j servers (used by deploy/servers.py).

Modules:
    config     constants and environment helpers shared by everything else
    probes     port check, tiny CQL / Bolt readiness clients, HTTP helpers
    base       the Server base class (jar assembly, process handling, readiness) and run_parallel
    pulsar, cassandra, neo4j
               one Server subclass each: ports, config files, JVM arguments, readiness probe
"""

from __future__ import annotations

from .base import Server, run_parallel
from .cassandra import Cassandra
from .config import SERVERS, ServerError, env_int, say
from .neo4j import Neo4j
from .pulsar import Pulsar

CLASSES: dict[str, type[Server]] = {"pulsar": Pulsar, "cassandra": Cassandra, "neo4j": Neo4j}

__all__ = [
    "CLASSES",
    "SERVERS",
    "Cassandra",
    "Neo4j",
    "Pulsar",
    "Server",
    "ServerError",
    "env_int",
    "run_parallel",
    "say",
]
