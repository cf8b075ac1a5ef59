"""The real servers the deployed-path benchmarks need: reused when they answer, else started with
`deploy/servers.py` (and stopped again at the end, so `make bench` leaves the machine as it was).

Endpoints follow the same environment variables as `deploy/servers.py` and the tests
(KGFLOW_PULSAR_PORT, KGFLOW_CASSANDRA_PORT, KGFLOW_NEO4J_BOLT_PORT, ...).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.harness.results import ROOT

SERVERS_PY = ROOT / "deploy" / "servers.py"
PORT_ENV = {
    "pulsar": ("KGFLOW_PULSAR_PORT", 6650),
    "cassandra": ("KGFLOW_CASSANDRA_PORT", 9042),
    "neo4j": ("KGFLOW_NEO4J_BOLT_PORT", 7687),
}


def port(name: str) -> int:
    """The client port of server `name` (its environment variable, else the default)."""
    env, default = PORT_ENV[name]
    return int(os.environ.get(env) or default)


def pulsar_url() -> str:
    """Where the Pulsar broker listens."""
    return os.environ.get("KGFLOW_PULSAR_URL") or f"pulsar://127.0.0.1:{port('pulsar')}"


def server_pids() -> dict[str, int]:
    """Pids of the servers deploy/servers.py runs (from its pid files; empty for servers it did not start)."""
    home = Path(os.environ.get("KGFLOW_SERVERS_HOME") or "~/.cache/kgflow/servers").expanduser()
    out: dict[str, int] = {}
    for name in PORT_ENV:
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = int((home / name / f"{name}.pid").read_text().split()[0])
            if Path(f"/proc/{pid}").exists():
                out[name] = pid
    return out


def port_open(p: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts connections on host:p."""
    with contextlib.suppress(OSError), socket.create_connection((host, p), timeout=1):
        return True
    return False


@dataclass
class Servers:
    """Which servers answer, which this run started, and why any is missing."""

    ready: set[str] = field(default_factory=set)
    started: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    start_s: float = 0.0

    def why_not(self, name: str) -> str:
        """Why server `name` cannot be used ('' if it can)."""
        if name in self.ready:
            return ""
        return self.failed.get(name, f"no {name} server on 127.0.0.1:{port(name)}")


def _servers_py(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SERVERS_PY), *args], text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )


@contextlib.contextmanager
def servers_for(names: Sequence[str], log: Callable[[str], None]) -> Iterator[Servers]:
    """The servers `names`, running for the block: those already answering are reused, the
    others started (in parallel) and stopped afterwards."""
    out = Servers()
    missing = [n for n in names if not port_open(port(n))]
    out.ready = {n for n in names if n not in missing}
    if missing:
        log(f"[bench] starting {', '.join(missing)} with deploy/servers.py (reusing {sorted(out.ready) or 'none'})")
        t = time.perf_counter()
        done = _servers_py("start", *missing)
        out.start_s = round(time.perf_counter() - t, 1)
        out.started = list(missing)
        for n in missing:
            if port_open(port(n)) and f"{n}: ready" in done.stdout:
                out.ready.add(n)
            else:
                out.failed[n] = f"failed to start: {_tail(done.stdout, n)}"
        if done.returncode != 0:
            log(f"[bench] deploy/servers.py start said:\n{done.stdout[-3000:]}")
    try:
        yield out
    finally:
        if out.started:
            log(f"[bench] stopping {', '.join(out.started)} (started by this run)")
            _servers_py("stop", *out.started)


def _tail(text: str, name: str) -> str:
    lines = [ln for ln in text.splitlines() if name in ln.lower() or "error" in ln.lower()]
    return " | ".join(lines[-3:])[-500:] or "no output"
