"""Gateway test support: an in-process system + gateway (websocket suite) and a real `kgflow up` subprocess
with PathQuestion 2H loaded (trustgraph-cli and load tests)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp import web

from processors.base.settings import RuntimeSettings
from processors.commands.system import System, embedded
from processors.gateway.service import GatewayProcessor, GatewaySettings
from processors.ingest.triples.loader import load_triples
from processors.ingest.triples.readers import read_triples
from processors.models.embeddings.model import OnnxMiniLM
from processors.stores.settings import StoreSettings
from schemas.tenant import Tenant

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PQ = ROOT.parent / "shared" / "datasets" / "pathquestion"


def free_port() -> int:
    """A free loopback TCP port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LiveGateway:
    """An in-process system with its gateway."""

    system: System
    gateway: GatewayProcessor

    @property
    def url(self) -> str:
        """Base URL."""
        return f"http://127.0.0.1:{self.gateway.port}"

    @property
    def ws(self) -> str:
        """Websocket URL."""
        return f"ws://127.0.0.1:{self.gateway.port}/api/v1/socket"

    async def load(self, user: str, collection: str, path: Path = ROOT / "examples" / "sample.tsv") -> None:
        """Load a file into the system's stores as `user`/`collection`."""
        await load_triples(self.system.stores, OnnxMiniLM.shared(), Tenant(user, collection), read_triples(path))


@pytest.fixture
async def live(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[LiveGateway]:
    """Every processor on a memory bus plus a gateway on a free port; sample graph loaded as default/sample.

    Override gateway settings with `@pytest.mark.parametrize("live", [GatewaySettings(...)], indirect=True)`.
    """
    settings: GatewaySettings = getattr(request, "param", None) or GatewaySettings(max_frame_bytes=64 * 1024)
    async with embedded(StoreSettings(home=tmp_path / "home"), RuntimeSettings(request_timeout_s=20)) as system:
        gw = GatewayProcessor(system.bus, system.runtime, settings, home=tmp_path / "home", prompts=system.prompts)
        await gw.start(port=0)
        live = LiveGateway(system, gw)
        await live.load("default", "sample")
        try:
            yield live
        finally:
            await gw.stop()


@dataclass(frozen=True)
class UpServer:
    """A `kgflow up` subprocess with PathQuestion 2H in collection `collection` of workspace `default`."""

    url: str
    collection: str
    home: Path


def _wait_health(url: str, proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"kgflow up exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(f"{url}/api/v1/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"kgflow up not healthy within {timeout_s}s:\n{log.read_text()[-4000:]}")


def up_env(**extra: str) -> dict[str, str]:
    """The environment of a test's `kgflow` subprocess: this one's, less any gateway token, plus `extra`."""
    env = {**os.environ, "KGFLOW_LOG_LEVEL": "WARNING"}
    env.pop("KGFLOW_GATEWAY_TOKEN", None)
    env.pop("KGFLOW_GATEWAY_TOKEN_FILE", None)
    return {**env, **extra}


@contextlib.contextmanager
def kgflow_up(home: Path, env: dict[str, str], port: int | None = None) -> Iterator[str]:
    """`kgflow up` over `home` on `port` (default: a free one) until the block ends; yields its base URL
    once healthy (its output is appended to `up.log` beside `home`)."""
    port = port or free_port()
    log = home.parent / "up.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [str(BIN / "kgflow"), "up", "--home", str(home), "--gateway-port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_health(url, proc, log)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def up_2h(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpServer]:
    """`kgflow up` on a free port over a fresh home where PathQuestion 2H was loaded with `kgflow load triples`."""
    home = tmp_path_factory.mktemp("gw-up") / "home"
    collection = "pq2h"
    env = up_env()
    subprocess.run(
        [str(BIN / "kgflow"), "load", "triples", str(PQ / "2H-kb.txt"), "--home", str(home), "-C", collection]
        + ["--no-progress"],
        check=True,
        env=env,
        capture_output=True,
        timeout=300,
    )
    with kgflow_up(home, env) as url:
        yield UpServer(url, collection, home)


def pq2h_questions(n: int) -> list[tuple[str, str]]:
    """The first `n` PathQuestion 2H (question, gold answer) pairs with distinct questions."""
    out: list[tuple[str, str]] = []
    for line in (PQ / "PQ-2H.txt").read_text(encoding="utf-8").splitlines():
        parts = line.split("\t")
        if len(parts) >= 2:
            out.append((parts[0].strip(), parts[1].split("(", 1)[0].strip()))
        if len(out) >= n:
            break
    return out


async def wait_for(predicate, timeout_s: float = 30.0, every_s: float = 0.1) -> None:  # type: ignore[no-untyped-def]
    """Poll an async predicate until it is true (fails the test at `timeout_s`)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await predicate():
            return
        await asyncio.sleep(every_s)
    raise AssertionError(f"condition not met within {timeout_s}s")


@contextlib.asynccontextmanager
async def served(app: web.Application) -> AsyncIterator[int]:
    """`app` served on a free loopback port (yielded) until the block ends."""
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()
