"""Figures every section reports the same way: percentiles, peak memory, CPU time."""

from __future__ import annotations

import os
import resource
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (nearest rank on sorted values; 0 for none)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (MB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def cpu_seconds(pid: int | str = "self", tid: int | None = None) -> float:
    """CPU time (user + system) of a process, or of one of its threads, so far (Linux /proc)."""
    path = f"/proc/{pid}/task/{tid}/stat" if tid is not None else f"/proc/{pid}/stat"
    try:
        fields = open(path).read().rsplit(")", 1)[1].split()  # noqa: SIM115 - one short read
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load_average() -> list[float]:
    """The machine's 1, 5 and 15 minute load averages: other work inflates every latency."""
    return [round(x, 2) for x in os.getloadavg()]
