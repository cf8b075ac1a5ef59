"""A Prometheus-style query route, `GET /api/metrics/query?query=...` (what TrustGraph's
`tg-show-processor-state`, `tg-show-flow-state`, `tg-show-token-rate` and `tg-verify-system-status` read).

With `KGFLOW_GATEWAY_PROMETHEUS_URL` set (a Prometheus server scraping every kgflow process), the query
is passed to its `/api/v1/query`, as TrustGraph's gateway does. Without, the gateway answers from the
metrics of its own process, which under `kgflow up` holds every processor: an instant vector selector
only (`name` or `name{label="value",...}`); anything else is refused as not supported. TrustGraph's
metric names are read as kgflow's: `processor_info` is `kgflow_processor_info` (one per running
processor), `consumer_state{consumer_state="running"}` is `kgflow_consumer_state` (one per processor,
flow and service consumed), `input_tokens_total` / `output_tokens_total` are `kgflow_llm_tokens_total`
by direction.
"""

from __future__ import annotations

import re
import time
from typing import Any

import aiohttp
from aiohttp import web
from prometheus_client import REGISTRY, CollectorRegistry

_SELECTOR = re.compile(r"^\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*(?:\{(.*)\})?\s*$", re.DOTALL)
_MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')
# TrustGraph's name -> (kgflow's metric, labels it implies)
ALIASES: dict[str, tuple[str, dict[str, str]]] = {
    "processor_info": ("kgflow_processor_info", {}),
    "consumer_state": ("kgflow_consumer_state", {}),
    "input_tokens_total": ("kgflow_llm_tokens_total", {"direction": "in"}),
    "output_tokens_total": ("kgflow_llm_tokens_total", {"direction": "out"}),
}


class QueryError(ValueError):
    """A query the built-in evaluator does not take."""


def parse(query: str) -> tuple[str, dict[str, str]]:
    """(metric name, label matchers) of an instant vector selector."""
    m = _SELECTOR.match(query)
    if m is None:
        raise QueryError(
            f"query {query!r} is not supported by kgflow's built-in metrics query (only instant vector "
            'selectors, name{label="value"}); set KGFLOW_GATEWAY_PROMETHEUS_URL to query a Prometheus server'
        )
    name, body = m.group(1), (m.group(2) or "").strip()
    labels: dict[str, str] = {}
    pos = 0
    while pos < len(body):
        mm = _MATCHER.match(body, pos)
        if mm is None:
            raise QueryError(f'query {query!r} is not supported by kgflow: only `label="value"` matchers are')
        labels[mm.group(1)] = mm.group(2).encode().decode("unicode_escape")
        pos = mm.end()
    return name, labels


def evaluate(query: str, registry: CollectorRegistry = REGISTRY) -> list[dict[str, Any]]:
    """The instant vector of `query` over this process's metrics (Prometheus' result shape)."""
    name, wanted = parse(query)
    running = wanted.pop("consumer_state", None) if name == "consumer_state" else None
    if running is not None and running != "running":
        return []
    metric, implied = ALIASES.get(name, (name, {}))
    wanted = {**implied, **wanted}
    now = time.time()
    result = []
    for family in registry.collect():
        for sample in family.samples:
            if sample.name != metric or any(sample.labels.get(k) != v for k, v in wanted.items()):
                continue
            if name in ("processor_info", "consumer_state") and sample.value <= 0:
                continue
            labels = {"__name__": name, **sample.labels, "job": "kgflow"}
            if name == "consumer_state":
                labels["consumer_state"] = "running"
            result.append({"metric": labels, "value": [now, _number(sample.value)]})
    return result


def _number(value: float) -> str:
    """A sample value as Prometheus writes it (`1`, not `1.0`)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _error(message: str, status: int = 400) -> web.Response:
    return web.json_response({"status": "error", "errorType": "bad_data", "error": message}, status=status)


async def answer(request: web.Request, prometheus_url: str | None) -> web.Response:
    """`GET /api/metrics/{path}`: `query` answered here, or everything passed to Prometheus."""
    path = request.match_info["path"]
    if prometheus_url:
        url = f"{prometheus_url.rstrip('/')}/api/v1/{path}"
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as s:
                async with s.get(url, params=request.query) as r:
                    return web.Response(status=r.status, body=await r.read(), content_type="application/json")
        except (aiohttp.ClientError, TimeoutError) as e:
            return _error(f"the Prometheus server at {prometheus_url} did not answer: {e}", 502)
    if path != "query":
        return _error(f"/api/metrics/{path} is not supported by kgflow's built-in metrics query (only /query)")
    try:
        result = evaluate(request.query.get("query", ""))
    except QueryError as e:
        return _error(str(e))
    return web.json_response({"status": "success", "data": {"resultType": "vector", "result": result}})
