"""A running kgflow for the reliability probes: `kgflow up` on a free port with known tokens, its
health, an authenticated gateway socket, and the process's memory."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp

from bench.harness.results import DATASETS

KGFLOW = Path(sys.executable).parent / "kgflow"
PQ2H = DATASETS / "pathquestion" / "2H-kb.txt"
ADMIN, TENANT = "bench-admin", "bench-tenant"


def log(msg: str) -> None:
    """Progress on stderr (the JSON goes to stdout)."""
    print(msg, file=sys.stderr, flush=True)


def rss_mb(pid: int) -> float:
    """Resident set size of process `pid` (MB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + 180
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/v1/health", timeout=2):
                return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"kgflow up did not start: {log_path.read_text()[-2000:]}") from None
            time.sleep(0.3)


@contextlib.asynccontextmanager
async def kgflow_up(
    home: Path, extra: list[str] | None = None, settings: dict[str, str] | None = None
) -> AsyncIterator[tuple[str, int]]:
    """`kgflow up` over `home` on a free port (tokens: ADMIN, and TENANT bound to workspace `default`);
    `extra`: more arguments (the distributed stack's bus and stores); `settings`: more environment."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tokens = home.parent / "tokens"
    tokens.write_text(f"{ADMIN}\n{TENANT} default\n")
    env = {**os.environ, "KGFLOW_GATEWAY_TOKEN_FILE": str(tokens), "KGFLOW_LOG_LEVEL": "ERROR", **(settings or {})}
    env.pop("KGFLOW_GATEWAY_TOKEN", None)
    log_path = home.parent / "up.log"
    with log_path.open("wb") as logfile:
        argv = [str(KGFLOW), "up", "--home", str(home), "--gateway-port", str(port), *(extra or [])]
        for attempt in range(5):  # on a shared Pulsar another session's config service may answer a step
            proc = await asyncio.to_thread(subprocess.Popen, argv, env=env, stdout=logfile, stderr=subprocess.STDOUT)
            try:
                await asyncio.to_thread(_wait_healthy, url := f"http://127.0.0.1:{port}", proc, log_path)
                break
            except RuntimeError as e:
                if not any(m in str(e) for m in ("unknown blueprint", "already running")) or attempt == 4:
                    raise
                log(f"[reliability] kgflow up met another flow registry ({e}); again")
                await asyncio.sleep(10)
        try:
            yield url, proc.pid
        finally:
            proc.terminate()
            try:
                await asyncio.to_thread(proc.wait, 30)
            except subprocess.TimeoutExpired:
                proc.kill()


def health(url: str) -> bool:
    """The gateway answers health with the running flow (an admin token)."""
    req = urllib.request.Request(f"{url}/api/v1/health", headers={"Authorization": f"Bearer {ADMIN}"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read()).get("flows") == ["default"]
    except OSError:
        return False


async def connect(session: aiohttp.ClientSession, url: str, token: str) -> aiohttp.ClientWebSocketResponse:
    """An authenticated gateway socket."""
    ws = await session.ws_connect(url.replace("http", "ws") + "/api/v1/socket", max_msg_size=64 << 20)
    await ws.send_json({"type": "auth", "token": token})
    reply = await ws.receive_json(timeout=30)
    if reply.get("type") != "auth-ok":
        raise RuntimeError(f"auth failed: {reply}")
    return ws
