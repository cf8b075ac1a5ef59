"""Targets, each with the measured value and whether it is met (None: not measured)."""

from __future__ import annotations

from typing import Any

SERVER_BACKENDS = ("cassandra", "neo4j")


class Targets:
    """Targets by name, each with the measured value, the target and whether it is met."""

    def __init__(self) -> None:
        self.out: dict[str, Any] = {}

    def put(self, name: str, value: Any, target: str, met: bool | None) -> None:
        self.out[name] = {"value": value, "target": target, "met": met}

    def at_most(self, name: str, value: float | None, limit: float) -> None:
        self.put(name, value, f"<= {limit}", None if value is None else value <= limit)

    def at_least(self, name: str, value: float | None, limit: float) -> None:
        self.put(name, value, f">= {limit}", None if value is None else value >= limit)

    def scaling(self, name: str, rps: dict[str, float] | None) -> None:
        """Throughput at concurrency 8 over concurrency 1."""
        ratio = round(rps["8"] / rps["1"], 2) if rps and rps.get("1") else None
        self.at_least(name, ratio, 1.5)


def _dicts(section: Any) -> dict[str, dict[str, Any]]:
    """The entries of a results section that were measured (a skipped section is a string)."""
    return {k: v for k, v in section.items() if isinstance(v, dict)} if isinstance(section, dict) else {}


def targets(results: dict[str, Any]) -> dict[str, Any]:
    """The graph section's targets: round trips, coverage, label cache and scaling, embedded and deployed."""
    t = Targets()
    emb = _dicts(results.get("embedded"))
    for key, r in emb.items():
        if "store_round_trips_max" not in r:
            continue
        # Counted where each backend talks to its store: the seeds take 3 round trips (vector search, entities the
        # question names, their labels), then one per hop and one for the path's labels.
        limit = r["max_path_length"] + 4
        t.put(f"{key}.store_round_trips", r["store_round_trips_max"], f"<= {limit} (max)",
              r["store_round_trips_max"] <= limit)  # fmt: skip
        if "answer_coverage" in r:
            t.at_least(f"{key}.answer_coverage", r["answer_coverage"], 0.99)
        if key.startswith("pathquestion"):
            t.at_least(f"{key}.answer_coverage_edge_limit_25", r["answer_coverage_edge_limit_25"], 0.95)
        t.at_least(f"{key}.label_cache_hit_ratio", r.get("label_cache_hit_ratio"), 0.9)
        if "throughput_rps" in r:
            t.scaling(f"embedded.{key}.throughput_8_over_1", r["throughput_rps"])
    big, small = emb.get("powerlaw-1m"), emb.get("powerlaw-10k")
    if big:
        t.at_least("powerlaw-1m.store_call_ratio", big.get("store_call_ratio"), 100)
        t.at_most("powerlaw-1m.p50_ms", big["p50_ms"], 30)
        t.at_least("powerlaw-1m.speedup_p50", big["speedup_p50"], 20)
        if small:
            ratio = round(big["p50_ms"] / small["p50_ms"], 2) if small["p50_ms"] else None
            t.at_most("p50_1m_over_10k", ratio, 2)
    pulsar = _dicts(results.get("pulsar"))
    bus = pulsar.pop("bus_round_trip", None)
    if bus:
        t.at_most("pulsar.overhead_per_round_trip_p50_ms", bus["pulsar_overhead_per_round_trip_p50_ms"], 3)
    for key, r in pulsar.items():
        if key == "powerlaw-1m":
            t.at_most("pulsar.powerlaw-1m.p50_ms", r["p50_ms"], 45)
            t.at_least("pulsar.powerlaw-1m.speedup_p50", r["speedup_p50"], 20)
        t.scaling(f"pulsar.{key}.throughput_8_over_1", r.get("throughput_rps"))
    for name in SERVER_BACKENDS:
        for key, r in _dicts(results.get(name)).items():
            if key == "pathquestion-3h":
                t.at_most(f"{name}.pathquestion-3h.p50_ms", r["p50_ms"], 60)
            t.scaling(f"{name}.{key}.throughput_8_over_1", r.get("throughput_rps"))
    return t.out


def documents_scale_targets(section: dict[str, Any]) -> dict[str, Any]:
    """The documents section's targets: latency, memory and latency after writes by backend and size."""
    t = Targets()
    for backend in ("sqlite", "neo4j"):
        # the sizes' own entries: baselines and profiles kept beside them are not measured sizes
        sizes = {k: v for k, v in _dicts(section.get(backend)).items() if k in ("1k", "10k", "100k", "1m")}
        for size, r in sizes.items():
            if backend == "neo4j" and size == "1m":
                t.at_most("neo4j.1m.p50_ms", r.get("p50_ms"), 300)
            t.at_most(f"{backend}.{size}.rss_mb ({r.get('rss_of', 'not measured')})", r.get("rss_mb"), 600)
            deployed = r.get("as_deployed")  # SQLite served as a fleet: the documents processor's own RSS
            if isinstance(deployed, dict):
                name = f"{backend}.{size}.as_deployed.rss_mb ({deployed.get('rss_of')})"
                t.at_most(name, deployed.get("rss_mb"), 600)
            after, p50 = r.get("after_write_ms"), r.get("p50_ms")
            t.at_most(f"{backend}.{size}.after_write_over_p50", round(after / p50, 2) if after and p50 else None, 2)
        big, small = sizes.get("1m", {}).get("p50_ms"), sizes.get("10k", {}).get("p50_ms")
        if "1m" in sizes or "10k" in sizes:
            t.at_most(f"{backend}.p50_1m_over_10k", round(big / small, 2) if big and small else None, 3)
    return t.out
