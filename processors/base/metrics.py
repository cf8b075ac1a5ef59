"""Prometheus metrics shared by every processor (one registry per process)."""

from __future__ import annotations

import re

from prometheus_client import Counter, Gauge, Histogram, start_http_server

from schemas.retrieval import RequestCost

REQUESTS = Counter("kgflow_requests_total", "Requests handled", ["processor", "flow", "service", "outcome"])
# A handler's fault (not the client's): every attempt, the retried ones too. Should stay 0.
INTERNAL_ERRORS = Counter(
    "kgflow_internal_errors_total", "Handler attempts that failed internally", ["processor", "service"]
)
LATENCY = Histogram(
    "kgflow_request_seconds",
    "Request handling time",
    ["processor", "service"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
STAGE = Histogram(
    "kgflow_stage_seconds",
    "Time per retrieval stage",
    ["processor", "stage"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
STORE_ROUND_TRIPS = Counter("kgflow_store_round_trips_total", "Store calls retrieval requests waited on", ["processor"])
STORE_REQUESTS = Counter(
    "kgflow_store_requests_total",
    "SQL statements, CQL requests, Cypher transactions of retrieval requests",
    ["processor"],
)
ROWS_READ = Counter("kgflow_store_rows_read_total", "Rows read from stores", ["processor"])
CACHE = Counter("kgflow_label_cache_total", "Label cache lookups", ["result"])
CACHE_HIT_RATIO = Gauge("kgflow_label_cache_hit_ratio", "Label cache hits over lookups since start", ["flow"])
TOKENS = Counter("kgflow_llm_tokens_total", "Language-model tokens", ["model", "direction"])
PROCESSOR_INFO = Gauge("kgflow_processor_info", "1 for each processor running in this process", ["processor"])
CONSUMER_STATE = Gauge(
    "kgflow_consumer_state", "1 while a processor consumes a flow's service topic", ["processor", "flow", "service"]
)

_started: set[int] = set()


def record_cost(processor: str, cost: RequestCost) -> None:
    """What one retrieval request cost (per-stage times, store round trips and requests, its
    own and its stages'), into the metrics; numbered stages (`hop_2`) share one series."""
    for stage, ms in cost.stage_ms.items():
        STAGE.labels(processor, re.sub(r"_\d+$", "", stage)).observe(ms / 1000)
    STORE_ROUND_TRIPS.labels(processor).inc(cost.store_round_trips)
    STORE_REQUESTS.labels(processor).inc(cost.store_requests)


def serve_metrics(port: int | None, host: str = "127.0.0.1") -> None:
    """Expose /metrics on `host:port` (once per port; None or 0 disables it)."""
    if port and port not in _started:
        try:
            start_http_server(port, addr=host)
        except OSError as e:
            raise RuntimeError(
                f"cannot serve metrics on {host}:{port} ({e.strerror or e}); "
                "choose another with --metrics-port or KGFLOW_METRICS_PORT"
            ) from None
        _started.add(port)
