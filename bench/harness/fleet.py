"""The deployed topology of docs/distributed.md: the flow registry and each processor of the
graph-rag flow in its own OS process (`kgflow run NAME`), on Pulsar, over the benchmark's stores.

The benchmark talks to it as a client would (requests to the flow's topics); what the processes
did is read from their own Prometheus metrics (`kgflow_requests_total`: every request they
handled, so every bus round trip) and their CPU time from /proc.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bench.harness.results import ROOT
from processors.base.runtime import ensure_default_flow
from processors.stores.settings import StoreSettings

KGFLOW = Path(sys.executable).parent / "kgflow"  # the console script, as an operator runs it
# What a graph-rag question touches (docs/distributed.md runs text-completion too; no LLM here).
GRAPH_RAG_FLEET = ("embeddings", "graph-embeddings", "triples", "label-resolver", "graph-rag")
START_TIMEOUT_S = 180.0  # graph-embeddings loads the entity index before it is ready
TENANT_NAMESPACES = ("flow", "config", "notify")  # what a deployment's topics live in (schemas.topics)


def die_with_parent() -> None:
    """In a child process: SIGKILL it when its parent dies without stopping it (Linux only), so a
    killed benchmark or test leaves no processor consuming the flow's topics."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


@contextlib.contextmanager
def own_tenant(name: str) -> Iterator[str]:
    """A Pulsar tenant of its own for a test or benchmark (namespaces flow, config, notify), removed
    afterwards (its topics first: the broker refuses to force-delete a namespace): its processes
    (KGFLOW_PULSAR_TENANT) share no config topic with other deployments on the broker."""
    base = f"http://127.0.0.1:{os.environ.get('KGFLOW_PULSAR_HTTP_PORT', '8080')}/admin/v2"

    def call(method: str, path: str, body: bytes | None = None) -> bytes:
        req = urllib.request.Request(f"{base}/{path}", data=body, method=method)
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=30) as res:  # noqa: S310 - the local broker's admin API
            return bytes(res.read())

    call("PUT", f"tenants/{name}", json.dumps({"allowedClusters": ["standalone"], "adminRoles": []}).encode())
    for ns in TENANT_NAMESPACES:
        call("PUT", f"namespaces/{name}/{ns}")
    try:
        yield name
    finally:
        for attempt in range(3):  # a stopped process's subscriptions may outlive it for a moment
            try:
                for ns in TENANT_NAMESPACES:
                    for t in json.loads(call("GET", f"namespaces/{name}/{ns}/topics")):
                        scheme, path = t.split("://", 1)
                        tenant, namespace, topic = path.split("/", 2)
                        call("DELETE", f"{scheme}/{tenant}/{namespace}/{urllib.parse.quote(topic, safe='')}?force=true")
                    call("DELETE", f"namespaces/{name}/{ns}")
                call("DELETE", f"tenants/{name}")
                break
            except urllib.error.HTTPError as e:
                if e.code == 404:
                    break
                time.sleep(1.0 + attempt)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def checkout_env() -> dict[str, str]:
    """This process's environment, with this checkout's code first on the path (the console script
    may belong to another editable install of kgflow)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def _env(store: StoreSettings, url: str, metrics_port: int) -> dict[str, str]:
    """A processor's settings, as an operator's environment would give them (KGFLOW_<FIELD>)."""
    env = checkout_env()
    env.update({f"KGFLOW_{k.upper()}": str(v) for k, v in store.model_dump().items()})
    env.update(KGFLOW_BUS="pulsar", KGFLOW_PULSAR_URL=url, KGFLOW_METRICS_PORT=str(metrics_port))
    env.update(KGFLOW_LOG_LEVEL="WARNING")
    return env


@dataclass
class Fleet:
    """Running processor processes: name -> (process, metrics port, log file)."""

    procs: dict[str, tuple[asyncio.subprocess.Process, int, Path]] = field(default_factory=dict)
    envs: dict[str, dict[str, str]] = field(default_factory=dict)

    def pids(self) -> dict[str, int]:
        """Each process's pid, by processor name (for CPU accounting)."""
        return {name: p.pid for name, (p, _, _) in self.procs.items()}

    async def requests_handled(self) -> int:
        """Requests the flow's processors have handled so far (each one a bus round trip)."""
        ports = [port for name, (_, port, _) in self.procs.items() if name != "config"]
        counts = await asyncio.gather(*(asyncio.to_thread(_requests_total, port) for port in ports))
        return sum(counts)

    async def _start(self, name: str, env: dict[str, str], logs: Path) -> None:
        log = logs / f"{name}.log"
        with log.open("wb") as out:
            proc = await asyncio.create_subprocess_exec(
                KGFLOW, "run", name,
                stdout=out, stderr=asyncio.subprocess.STDOUT, env=env, cwd=ROOT, preexec_fn=die_with_parent,
            )  # fmt: skip
        self.procs[name] = (proc, int(env["KGFLOW_METRICS_PORT"]), log)
        self.envs[name] = env

    async def _ready(self, name: str, port_retries: int = 3) -> None:
        proc, _, log = self.procs[name]
        deadline = time.monotonic() + START_TIMEOUT_S
        while f"kgflow run: {name} ready" not in await asyncio.to_thread(log.read_text, errors="replace"):
            if proc.returncode is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-1500:]
                if proc.returncode is not None and "cannot serve metrics" in tail and port_retries > 0:
                    # _free_port's port was free when asked, but another socket took it before the
                    # child bound it (an outgoing connection draws from the same range): a new one
                    await self._start(name, {**self.envs[name], "KGFLOW_METRICS_PORT": str(_free_port())}, log.parent)
                    return await self._ready(name, port_retries - 1)
                raise RuntimeError(f"kgflow run {name} did not start (exit {proc.returncode}): {tail}")
            await asyncio.sleep(0.2)

    async def stop(self) -> None:
        """SIGTERM every process (they drain and exit), then wait for them."""
        for proc, _, _ in self.procs.values():
            if proc.returncode is None:
                proc.terminate()
        for proc, _, _ in self.procs.values():
            try:
                await asyncio.wait_for(proc.wait(), 30)
            except TimeoutError:
                proc.kill()
                await proc.wait()


def _requests_total(port: int) -> int:
    """The sum of `kgflow_requests_total` on one process's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as res:  # noqa: S310 - loopback
        text = res.read().decode()
    counted = [line for line in text.splitlines() if line.startswith("kgflow_requests_total{")]
    return int(sum(float(line.rsplit(" ", 1)[1]) for line in counted))


async def _start_default_flow(url: str) -> None:
    """What an operator does first: the shipped blueprint, flow `default` started."""
    from processors.base.pulsar_bus import PulsarBus

    bus = PulsarBus(url)
    try:
        await ensure_default_flow(bus)
    finally:
        await bus.close()


@contextlib.asynccontextmanager
async def processor_fleet(
    store: StoreSettings, url: str, names: tuple[str, ...] = GRAPH_RAG_FLEET
) -> AsyncIterator[Fleet]:
    """`kgflow run config` (flow `default` started on it) and `kgflow run NAME` for each of `names`,
    all ready; stopped on exit. Each run starts with cold caches, as the in-process paths do."""
    fleet = Fleet()
    with tempfile.TemporaryDirectory(prefix="kgflow-fleet-") as tmp:
        logs = Path(tmp)
        config_store = store.model_copy(update={"home": logs / "config-home"})  # flows.json of its own
        try:
            await fleet._start("config", _env(config_store, url, _free_port()), logs)
            await fleet._ready("config")
            await _start_default_flow(url)
            for name in names:
                await fleet._start(name, _env(store, url, _free_port()), logs)
            await asyncio.gather(*(fleet._ready(n) for n in names))
            yield fleet
        finally:
            await fleet.stop()
