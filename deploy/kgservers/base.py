"""The Server base class (jar assembly, process handling, readiness, stop, status) and run_parallel."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import struct
import subprocess
import threading
import time
import urllib.error
from collections.abc import Callable, Iterable
from pathlib import Path

from .config import DEPENDENCY_PLUGIN, DEPLOY_DIR, ServerError, env_int, home, java_bin, say
from .probes import port_open


class Server:
    """One server: a java process in its own process group, bound to HOST, with a fresh run dir on every start
    (KGFLOW_SERVERS_KEEP_DATA=1 keeps the run dir's `data/`: a long build survives a restart).

    Layout under home(): <name>/{lib,run,<name>.log,<name>.pid}. Subclasses give the ports, config files,
    JVM/app arguments, readiness probe and endpoints.
    """

    name = ""
    main_class = ""

    def __init__(self) -> None:
        self.dir = home() / self.name
        self.lib = self.dir / "lib"
        self.run = self.dir / "run"
        self.log = self.dir / f"{self.name}.log"
        self.pidfile = self.dir / f"{self.name}.pid"
        self.pom = DEPLOY_DIR / self.name / "pom.xml"

    # --- to override
    def ports(self) -> dict[str, int]:
        """Named TCP ports the server listens on (from the environment)."""
        raise NotImplementedError

    def write_config(self) -> None:
        """Write the config files into the fresh run dir."""
        raise NotImplementedError

    def jvm_args(self) -> list[str]:
        """JVM options (heap, GC, module opens, system properties)."""
        raise NotImplementedError

    def classpath(self) -> str:
        """The -cp value."""
        return f"{self.lib}/*"

    def app_args(self) -> list[str]:
        """Arguments after the main class."""
        return []

    def probe(self) -> str | None:
        """Return None when ready, else a short reason."""
        raise NotImplementedError

    def after_ready(self) -> None:
        """Setup run once the server is ready (e.g. Pulsar namespaces)."""
        pass

    def endpoints(self) -> str:
        """Human-readable addresses for the `ready at ...` line."""
        raise NotImplementedError

    # --- lib assembly
    def pom_digest(self) -> str:
        """sha256 of deploy/<name>/pom.xml (the lib dir is re-assembled when it changes)."""
        return hashlib.sha256(self.pom.read_bytes()).hexdigest()

    def ensure_lib(self) -> None:
        """Assemble <home>/<name>/lib with maven unless its .kgflow-pom-sha256 marker matches the pom."""
        marker = self.lib / ".kgflow-pom-sha256"
        digest = self.pom_digest()
        if marker.exists() and marker.read_text().strip() == digest:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / "lib.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        say(f"{self.name}: assembling jars from Maven Central into {self.lib} (first run only) ...")
        t0 = time.monotonic()
        cmd = [
            os.environ.get("KGFLOW_MVN", "mvn"),
            "-q",
            "-B",
            "-f",
            str(self.pom),
            DEPENDENCY_PLUGIN,
            "-DincludeScope=runtime",
            f"-DoutputDirectory={tmp}",
        ]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0 or not any(tmp.glob("*.jar")):
            tail = "\n".join(proc.stdout.splitlines()[-50:])
            raise ServerError(f"{self.name}: maven failed (exit {proc.returncode}):\n{tail}")
        (tmp / ".kgflow-pom-sha256").write_text(digest + "\n")
        shutil.rmtree(self.lib, ignore_errors=True)
        tmp.rename(self.lib)
        size = sum(f.stat().st_size for f in self.lib.glob("*.jar")) / 2**20
        say(f"{self.name}: jars ready in {time.monotonic() - t0:.0f}s ({size:.0f} MiB)")

    # --- process handling
    def read_pid(self) -> int | None:
        """The pid in the pidfile if that process is still our server, else None."""
        try:
            pid = int(self.pidfile.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if self.is_ours(pid) else None

    def is_ours(self, pid: int) -> bool:
        """The pid is alive and is the java we started (guards against pid reuse)."""
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        return f"-Dkgflow.server={self.name}".encode() in cmdline

    def check_ports_free(self) -> None:
        """Raise ServerError if another process already listens on one of our ports."""
        busy = [f"{k}={p}" for k, p in self.ports().items() if port_open(p, 0.5)]
        if busy:
            raise ServerError(f"{self.name}: port(s) already in use by another process: {', '.join(busy)}")

    def start(self, deadline_s: float) -> float:
        """Start (or adopt a running instance) and wait until ready; seconds it took, 0.0 if it was running."""
        pid = self.read_pid()
        if pid:
            say(f"{self.name}: already running (pid {pid}); checking readiness")
            self.wait_ready(pid, time.monotonic() + deadline_s)
            return 0.0
        self.ensure_lib()
        self.check_ports_free()
        self.clear_run(keep_data=env_int("KGFLOW_SERVERS_KEEP_DATA", 0) == 1)
        self.write_config()
        cmd = [
            java_bin(),
            f"-Dkgflow.server={self.name}",
            *self.jvm_args(),
            "-cp",
            self.classpath(),
            self.main_class,
            *self.app_args(),
        ]
        (self.run / "command.txt").write_text(" ".join(cmd) + "\n")
        t0 = time.monotonic()
        with open(self.log, "wb") as log:
            proc = subprocess.Popen(
                cmd,
                cwd=self.run,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.pidfile.write_text(f"{proc.pid}\n")
        say(f"{self.name}: started pid {proc.pid}, log {self.log}")
        try:
            self.wait_ready(proc.pid, t0 + deadline_s, proc)
        except ServerError:
            self.stop(quiet=True)
            raise
        return time.monotonic() - t0

    def clear_run(self, keep_data: bool) -> None:
        """An empty run dir, or with `keep_data` one holding only the last run's `data/`."""
        if not keep_data:
            shutil.rmtree(self.run, ignore_errors=True)
        elif self.run.exists():
            for p in self.run.iterdir():
                if p.name != "data":
                    shutil.rmtree(p) if p.is_dir() else p.unlink()
            say(f"{self.name}: keeping {self.run / 'data'}")
        self.run.mkdir(parents=True, exist_ok=True)

    def wait_ready(self, pid: int, deadline: float, proc: subprocess.Popen | None = None) -> None:
        """Probe every 0.5 s until ready, then run after_ready; ServerError on exit or deadline."""
        reason = "not probed yet"
        while True:
            exited = proc.poll() is not None if proc else not self.is_ours(pid)
            if exited:
                code = proc.returncode if proc else "?"
                raise ServerError(f"{self.name}: process exited (code {code}) before it was ready\n{self.log_tail()}")
            try:
                reason = self.probe()
            except (OSError, ConnectionError, ValueError, struct.error) as e:
                reason = f"{type(e).__name__}: {e}"
            if reason is None:
                try:
                    self.after_ready()
                except (OSError, urllib.error.URLError) as e:
                    raise ServerError(f"{self.name}: ready, but post-start setup failed: {e}\n{self.log_tail()}") from e
                return
            if time.monotonic() > deadline:
                raise ServerError(f"{self.name}: not ready before the deadline ({reason})\n{self.log_tail()}")
            time.sleep(0.5)

    def log_tail(self, n: int = 50) -> str:
        """The last n lines of the server log, framed for error messages."""
        try:
            lines = self.log.read_text(errors="replace").splitlines()[-n:]
        except OSError:
            return "(no log)"
        return f"---- last {len(lines)} lines of {self.log} ----\n" + "\n".join(lines) + "\n----"

    def stop(self, quiet: bool = False) -> bool:
        """SIGTERM the process group, SIGKILL after KGFLOW_SERVERS_STOP_TIMEOUT; False if it would not die."""
        pid = self.read_pid()
        if not pid:
            if not quiet:
                say(f"{self.name}: not running")
            self.pidfile.unlink(missing_ok=True)
            return True
        t0 = time.monotonic()
        timeout = env_int("KGFLOW_SERVERS_STOP_TIMEOUT", 45)
        try:
            os.killpg(pid, signal.SIGTERM)  # pid == pgid: started with start_new_session
        except ProcessLookupError:
            pass
        killed = False
        while self._group_alive(pid):
            if time.monotonic() - t0 > timeout and not killed:
                say(f"{self.name}: still running after {timeout}s, sending SIGKILL")
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                killed = True
            if time.monotonic() - t0 > timeout + 15:
                say(f"{self.name}: process group {pid} did not go away")
                return False
            time.sleep(0.2)
        self.pidfile.unlink(missing_ok=True)
        if not quiet:
            say(f"{self.name}: stopped (pid {pid}) in {time.monotonic() - t0:.1f}s{' (SIGKILL)' if killed else ''}")
        return True

    @staticmethod
    def _group_alive(pgid: int) -> bool:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        # reap if it is our child (only when stop runs in the same process as start)
        try:
            os.waitpid(pgid, os.WNOHANG)
        except ChildProcessError:
            pass
        # a zombie leader still counts as a member: look at /proc state
        try:
            state = Path(f"/proc/{pgid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state == "Z":
                return False
        except (OSError, IndexError):
            return False
        return True

    def status(self) -> bool:
        """Print running/ready state (pid, RSS, endpoints); True if running and ready."""
        pid = self.read_pid()
        if not pid:
            say(f"{self.name}: stopped")
            return False
        try:
            reason = self.probe()
        except (OSError, ConnectionError, ValueError, struct.error) as e:
            reason = f"{type(e).__name__}: {e}"
        rss = ""
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    rss = f", rss {int(line.split()[1]) // 1024} MiB"
        except OSError:
            pass
        if reason is None:
            say(f"{self.name}: running (pid {pid}{rss}), ready at {self.endpoints()}")
            return True
        say(f"{self.name}: running (pid {pid}{rss}), NOT ready: {reason}")
        return False


def run_parallel(servers: Iterable[Server], fn: Callable[[Server], object]) -> dict[str, object]:
    """Run fn(server) for each server in its own thread; map each name to its result or ServerError."""
    results: dict[str, object] = {}

    def work(s: Server) -> None:
        try:
            results[s.name] = fn(s)
        except ServerError as e:
            results[s.name] = e
        except Exception as e:  # report, never hang the others
            results[s.name] = ServerError(f"{s.name}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=work, args=(s,), name=s.name) for s in servers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results
