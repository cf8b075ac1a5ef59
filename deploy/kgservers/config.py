"""Constants and environment helpers shared by the server launcher modules."""

from __future__ import annotations

import os
import threading
from pathlib import Path

DEPLOY_DIR = Path(__file__).resolve().parent.parent
SERVERS = ("pulsar", "cassandra", "neo4j")
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies"
HOST = "127.0.0.1"
HEAP = os.environ.get("KGFLOW_SERVERS_HEAP", "1g")

_print_lock = threading.Lock()


class ServerError(Exception):
    """A server failed to assemble, start, become ready or stop; the message says why."""


def say(*args: object) -> None:
    """Print a line atomically (servers start in parallel threads) and flush it."""
    with _print_lock:
        print(*args, flush=True)


def env_int(name: str, default: int) -> int:
    """Integer environment variable `name`, or `default` when unset or blank."""
    value = os.environ.get(name, "").strip()
    return int(value) if value else default


def home() -> Path:
    """Cache + run directory of all servers (KGFLOW_SERVERS_HOME)."""
    return Path(os.environ.get("KGFLOW_SERVERS_HOME") or "~/.cache/kgflow/servers").expanduser().resolve()


def java_bin() -> str:
    """The java binary: KGFLOW_JAVA, else $JAVA_HOME/bin/java, else `java` on PATH."""
    if os.environ.get("KGFLOW_JAVA"):
        return os.environ["KGFLOW_JAVA"]
    if os.environ.get("JAVA_HOME"):
        return str(Path(os.environ["JAVA_HOME"]) / "bin" / "java")
    return "java"


def common_jvm_args() -> list[str]:
    """JVM options every server gets."""
    return [
        "-XX:+UseG1GC",
        "-XX:+ExitOnOutOfMemoryError",
        "-XX:-OmitStackTraceInFastThrow",
        "-Djava.net.preferIPv4Stack=true",
        "-Dio.netty.tryReflectionSetAccessible=true",
    ]
