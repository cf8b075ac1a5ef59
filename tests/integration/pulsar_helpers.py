"""Helpers for multi-process tests on the real Pulsar: OS processes in their own process
groups with logs captured to files (tails printed on failure), and broker admin queries."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

from bench.harness.fleet import die_with_parent

ROOT = Path(__file__).resolve().parent.parent.parent
WORKERS = Path(__file__).resolve().parent / "workers"
BIN = Path(sys.executable).parent


class Proc:
    """One child process (its own process group); stdout and stderr go to files."""

    def __init__(self, name: str, argv: list[str], log_dir: Path, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.argv = argv
        self.out = log_dir / f"{name}.out"
        self.err = log_dir / f"{name}.err"
        with self.out.open("wb") as out, self.err.open("wb") as err:
            self.popen = subprocess.Popen(
                argv,
                cwd=ROOT,
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
                start_new_session=True,
                preexec_fn=die_with_parent,
            )

    @property
    def pid(self) -> int:
        """The child's pid (also its process group id)."""
        return self.popen.pid

    def lines(self, which: str = "out") -> list[str]:
        """Lines the child has written so far to stdout (`out`) or stderr (`err`)."""
        path = self.out if which == "out" else self.err
        return path.read_text(errors="replace").splitlines()

    def wait_for(self, needle: str | Callable[[str], bool], timeout_s: float = 60.0, which: str = "out") -> str:
        """Wait until a line containing `needle` (or matching the predicate) appears; fails early
        if the child exits."""
        match = needle if callable(needle) else lambda line: needle in line
        deadline = time.monotonic() + timeout_s
        while True:
            for line in self.lines(which):
                if match(line):
                    return line
            if self.popen.poll() is not None:
                raise AssertionError(f"{self.name} exited ({self.popen.returncode}) before {needle!r}\n{self.tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: no {needle!r} within {timeout_s}s\n{self.tail()}")
            time.sleep(0.1)

    async def await_line(self, needle: str | Callable[[str], bool], timeout_s: float = 60.0, which: str = "out") -> str:
        """`wait_for` without blocking the event loop."""
        return await asyncio.to_thread(self.wait_for, needle, timeout_s, which)

    def signal(self, sig: int) -> None:
        """Send `sig` to the child's whole process group."""
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            pass

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM the group, then SIGKILL it if it is still there after `grace_s`."""
        if self.popen.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                self.popen.wait(grace_s)
            except subprocess.TimeoutExpired:
                pass
        self.signal(signal.SIGKILL)  # stragglers in the group, even if the leader is gone
        if self.popen.poll() is None:
            self.popen.wait(5)

    def tail(self, n: int = 40) -> str:
        """The last lines of both logs, for failure messages."""
        parts = []
        for which in ("out", "err"):
            lines = self.lines(which)[-n:]
            parts.append(f"--- {self.name} std{which} (last {len(lines)} lines) ---\n" + "\n".join(lines))
        return "\n".join(parts)


class Procs:
    """Starts children for one test and always kills them at the end."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.started: list[Proc] = []

    def start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Proc:
        """Start `argv` as child `name` (names must be unique within a test)."""
        proc = Proc(name, argv, self.log_dir, env)
        self.started.append(proc)
        return proc

    def echo_worker(self, name: str, pulsar_url: str, *args: str) -> Proc:
        """Start the echo test processor (tests/integration/workers/echo.py)."""
        return self.start(name, [sys.executable, str(WORKERS / "echo.py"), "--pulsar", pulsar_url, *args])

    def kgflow(self, name: str, *args: str, env: dict[str, str] | None = None) -> Proc:
        """Start `kgflow ARGS...` from this venv."""
        return self.start(name, [str(BIN / "kgflow"), *args], env)

    def tails(self) -> str:
        """Log tails of every child."""
        return "\n".join(p.tail() for p in self.started)

    def stop_all(self, grace_s: float = 10.0) -> None:
        """SIGTERM every child at once, then reap each (SIGKILL after the shared grace period)."""
        for p in self.started:
            if p.popen.poll() is None:
                p.signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for p in reversed(self.started):
            p.stop(max(0.1, deadline - time.monotonic()))


@contextlib.contextmanager
def running(log_dir: Path) -> Iterator[Procs]:
    """Child processes of one test: killed on exit (even on failure); their log tails are
    printed then, which pytest shows for failed tests."""
    log_dir.mkdir(parents=True, exist_ok=True)
    ps = Procs(log_dir)
    try:
        yield ps
    finally:
        ps.stop_all()
        print(ps.tails())


def admin_base() -> str:
    """Pulsar admin REST base URL."""
    return f"http://127.0.0.1:{os.environ.get('KGFLOW_PULSAR_HTTP_PORT', '8080')}/admin/v2"


def topic_stats(topic: str) -> dict:
    """Broker stats of a topic (`[non-]persistent://tenant/ns/name`), {} if it has none."""
    scheme, path = topic.split("://", 1)
    tenant, ns, name = path.split("/", 2)
    url = f"{admin_base()}/{scheme}/{tenant}/{ns}/{urllib.parse.quote(name, safe='')}/stats"
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return {}
        raise


def consumer_count(topic: str, subscription: str) -> int:
    """Connected consumers of `subscription` on `topic`."""
    sub = topic_stats(topic).get("subscriptions", {}).get(subscription, {})
    return len(sub.get("consumers", []))


async def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str, interval_s: float = 0.2) -> None:
    """Poll the blocking `predicate` (in a thread) until true; fail with `what` after `timeout_s`
    (a bound against hanging, not a measurement)."""
    deadline = time.monotonic() + timeout_s
    while not await asyncio.to_thread(predicate):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(interval_s)
