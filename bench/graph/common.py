"""What every benchmark section shares: how much to run, the graphs, progress logging."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.graph import graphs

CONCURRENCY = (1, 8, 32)


@dataclass
class Config:
    """How much of each benchmark to run."""

    quick: bool
    pq_questions: int | None  # None: every question
    gen_questions: int
    classic_pq: int
    classic_gen: int
    throughput_requests: int
    server_questions: int = 200  # per PathQuestion set on Cassandra / Neo4j
    server_warmup_s: float = 30.0  # untimed questions first on Cassandra / Neo4j (a cold JVM is 1.5-2.4x slower)
    pulsar_questions: int = 50  # per graph over Pulsar (each round)
    pulsar_rounds: int = 2  # in-process and Pulsar alternate this many times on the same questions
    pulsar_classic: int = 10
    pulsar_throughput_requests: int = 150  # per concurrency level, over Pulsar and in-process
    bus_requests: int = 300  # echo round trips per bus and round
    bus_rounds: int = 3
    cache_questions: int = 200  # distinct questions of the label-cache workload, each asked once


@dataclass
class Dataset:
    """One graph to benchmark: where it lives and what to ask."""

    key: str
    collection: str
    home: Path
    questions: list[str]
    answers: list[str] | None
    max_path_length: int
    info: dict[str, Any]
    hub_questions: list[graphs.Question] | None = None  # generated graphs: questions starting at hubs


def log(msg: str) -> None:
    """Progress on stderr (the JSON goes to stdout)."""
    print(msg, file=sys.stderr, flush=True)


def sample(items: list[Any], n: int | None) -> list[Any]:
    """Every ⌈len/n⌉-th item (deterministic, spread over the file)."""
    if n is None or n >= len(items):
        return items
    step = len(items) / n
    return [items[int(i * step)] for i in range(n)]
