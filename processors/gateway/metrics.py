"""Gateway metrics (exported with every other kgflow metric at GET /api/metrics)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from schemas.services import SERVICES

REQUESTS = Counter("kgflow_gateway_requests_total", "Gateway requests", ["transport", "service", "outcome"])
LATENCY = Histogram(
    "kgflow_gateway_request_seconds",
    "Gateway request time to the last frame",
    ["service"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
SOCKETS = Gauge("kgflow_gateway_sockets", "Open gateway websockets")
INFLIGHT = Gauge("kgflow_gateway_inflight", "Gateway requests in flight")
IMPORTED = Counter("kgflow_gateway_imported_triples_total", "Triples imported through the gateway")

_KNOWN = frozenset({*SERVICES, "flow", "config"})


def service_label(service: str) -> str:
    """A bounded label value for a client-chosen service name."""
    return service if service in _KNOWN else "other"
