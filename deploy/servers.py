#!/usr/bin/env python3
"""Start, stop and inspect real Pulsar, Cassandra and Neo4j servers without Docker.

Usage:
    python3 deploy/servers.py start  [pulsar|cassandra|neo4j ...]   # no names = all three
    python3 deploy/servers.py stop   [pulsar|cassandra|neo4j ...]
    python3 deploy/servers.py status [pulsar|cassandra|neo4j ...]

Each server is a set of jars from Maven Central, assembled once with
    mvn -q -f deploy/<name>/pom.xml org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory=<home>/<name>/lib
into a cache outside the repo (re-assembled only when the pom changes), and
started with `java` in its own process group, bound to 127.0.0.1, with a fresh
data directory on every start. `start` waits for real readiness:
    pulsar     GET http://127.0.0.1:<http>/admin/v2/brokers/health answers "ok"
               (then the tenant/namespaces of KGFLOW_PULSAR_NAMESPACES are created)
    cassandra  a CQL `SELECT release_version FROM system.local` over the native protocol
    neo4j      a Bolt `RETURN 1` on database "neo4j"
Only the Python standard library is used (this runs before any venv exists).

Environment variables (defaults in brackets):
    KGFLOW_SERVERS_HOME           cache + run dirs [~/.cache/kgflow/servers]
                                  layout: <home>/<name>/{lib,run,<name>.log,<name>.pid}
    KGFLOW_SERVERS_TIMEOUT        readiness deadline per server, seconds [240]
    KGFLOW_SERVERS_STOP_TIMEOUT   seconds between SIGTERM and SIGKILL on stop [45]
    KGFLOW_SERVERS_HEAP           max Java heap of each server [1g]
    KGFLOW_PULSAR_PORT            Pulsar binary protocol [6650]
    KGFLOW_PULSAR_HTTP_PORT       Pulsar admin/REST [8080]
    KGFLOW_PULSAR_BOOKIE_PORT     in-process bookie [3181]
    KGFLOW_PULSAR_NAMESPACES      comma-separated tenant/namespace list created once
                                  Pulsar is ready; empty = none [kgflow/flow,kgflow/config,kgflow/notify]
    KGFLOW_CASSANDRA_PORT         CQL native transport [9042]
    KGFLOW_CASSANDRA_STORAGE_PORT inter-node storage port [7000]
    KGFLOW_NEO4J_BOLT_PORT        Bolt [7687]
    KGFLOW_NEO4J_HTTP_PORT        HTTP [7474]
    KGFLOW_NEO4J_ROUTING_PORT     Neo4j server-side routing listener [7688]
    JAVA_HOME / KGFLOW_JAVA       java binary (OpenJDK 17) [$JAVA_HOME/bin/java or java]
    KGFLOW_MVN                    maven binary [mvn]

Exit status: 0 on success; 1 if a server failed to assemble / become ready
(its last 50 log lines are printed) or, for `status`, if any is not ready.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

DEPLOY_DIR = Path(__file__).resolve().parent
SERVERS = ("pulsar", "cassandra", "neo4j")
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies"
HOST = "127.0.0.1"

_print_lock = threading.Lock()


def say(*args) -> None:
    with _print_lock:
        print(*args, flush=True)


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    return int(value) if value else default


def home() -> Path:
    return Path(os.environ.get("KGFLOW_SERVERS_HOME") or "~/.cache/kgflow/servers").expanduser().resolve()


def java_bin() -> str:
    if os.environ.get("KGFLOW_JAVA"):
        return os.environ["KGFLOW_JAVA"]
    if os.environ.get("JAVA_HOME"):
        return str(Path(os.environ["JAVA_HOME"]) / "bin" / "java")
    return "java"


HEAP = os.environ.get("KGFLOW_SERVERS_HEAP", "1g")


class ServerError(Exception):
    pass


# --------------------------------------------------------------------------- readiness probes
def port_open(port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return buf


def cql_release_version(port: int, timeout: float = 5.0) -> str:
    """Run `SELECT release_version FROM system.local` over CQL native protocol v4."""

    def frame(stream: int, opcode: int, body: bytes) -> bytes:
        return struct.pack(">BBhBi", 0x04, 0, stream, opcode, len(body)) + body

    def string(s: str) -> bytes:
        b = s.encode()
        return struct.pack(">H", len(b)) + b

    def read_frame(sock):
        _ver, _flags, _stream, opcode, length = struct.unpack(">BBhBi", _recv_exact(sock, 9))
        return opcode, _recv_exact(sock, length)

    def read_string(body: bytes, pos: int):
        (n,) = struct.unpack_from(">H", body, pos)
        return body[pos + 2:pos + 2 + n].decode(), pos + 2 + n

    def error_text(body: bytes) -> str:
        code = struct.unpack_from(">i", body, 0)[0]
        return f"CQL error 0x{code:04x}: {read_string(body, 4)[0]}"

    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(frame(1, 0x01, struct.pack(">H", 1) + string("CQL_VERSION") + string("3.0.0")))
        opcode, body = read_frame(sock)
        if opcode != 0x02:  # READY
            raise ConnectionError(error_text(body) if opcode == 0 else f"unexpected opcode {opcode}")
        query = b"SELECT release_version FROM system.local"
        sock.sendall(frame(2, 0x07, struct.pack(">i", len(query)) + query + struct.pack(">HB", 0x0001, 0)))
        opcode, body = read_frame(sock)
        if opcode == 0x00:
            raise ConnectionError(error_text(body))
        kind, flags, ncols = struct.unpack_from(">iii", body, 0)
        if opcode != 0x08 or kind != 2 or ncols != 1:
            raise ConnectionError(f"unexpected CQL result opcode={opcode} kind={kind}")
        pos = 12
        if flags & 0x0002:  # paging state
            (n,) = struct.unpack_from(">i", body, pos)
            pos += 4 + max(n, 0)
        if flags & 0x0001:  # global table spec
            _, pos = read_string(body, pos)
            _, pos = read_string(body, pos)
        else:
            _, pos = read_string(body, pos)
            _, pos = read_string(body, pos)
        _, pos = read_string(body, pos)  # column name
        pos += 2  # type id (varchar)
        (nrows,) = struct.unpack_from(">i", body, pos)
        pos += 4
        if nrows < 1:
            raise ConnectionError("system.local returned no rows")
        (n,) = struct.unpack_from(">i", body, pos)
        return body[pos + 4:pos + 4 + n].decode()


def _ps_string(s: str) -> bytes:
    b = s.encode()
    if len(b) < 16:
        return bytes([0x80 + len(b)]) + b
    if len(b) < 256:
        return bytes([0xD0, len(b)]) + b
    return bytes([0xD1]) + struct.pack(">H", len(b)) + b


def _ps_map(d: dict) -> bytes:
    out = bytes([0xA0 + len(d)])
    for k, v in d.items():
        out += _ps_string(k)
        if isinstance(v, str):
            out += _ps_string(v)
        elif isinstance(v, int) and -16 <= v < 128:
            out += struct.pack(">b", v)
        else:
            raise TypeError(v)
    return out


def bolt_return_1(port: int, database: str = "neo4j", timeout: float = 5.0) -> None:
    """Run `RETURN 1` over Bolt 4.4 (no auth) and check the record is [1]."""

    def send(sock, signature: int, *fields: bytes) -> None:
        msg = bytes([0xB0 + len(fields), signature]) + b"".join(fields)
        sock.sendall(struct.pack(">H", len(msg)) + msg + b"\x00\x00")

    def recv(sock) -> bytes:
        msg = b""
        while True:
            (n,) = struct.unpack(">H", _recv_exact(sock, 2))
            if n == 0:
                if msg:
                    return msg
                continue  # NOOP keep-alive chunk
            msg += _recv_exact(sock, n)

    def expect_success(sock, what: str) -> None:
        msg = recv(sock)
        if msg[1] != 0x70:
            raise ConnectionError(f"Bolt {what} failed: {msg[2:].decode(errors='replace')[:300]}")

    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(b"\x60\x60\xb0\x17" + bytes([0, 0, 4, 4]) + bytes(12))
        version = _recv_exact(sock, 4)
        if version != bytes([0, 0, 4, 4]):
            raise ConnectionError(f"Bolt 4.4 not negotiated: {version.hex()}")
        send(sock, 0x01, _ps_map({"user_agent": "kgflow-servers/1", "scheme": "none"}))
        expect_success(sock, "HELLO")
        send(sock, 0x10, _ps_string("RETURN 1 AS x"), _ps_map({}), _ps_map({"db": database}))
        expect_success(sock, "RUN")
        send(sock, 0x3F, _ps_map({"n": -1}))
        record = recv(sock)
        if record[:4] != bytes([0xB1, 0x71, 0x91, 0x01]):
            raise ConnectionError(f"Bolt RETURN 1 gave {record.hex()}")
        expect_success(sock, "PULL")


def http_get(url: str, timeout: float = 3.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read().decode()


def http_put_json(url: str, payload, timeout: float = 10.0) -> int:
    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(url, data=data, method="PUT", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        if e.code == 409:  # already exists
            return e.code
        raise


# --------------------------------------------------------------------------- servers
class Server:
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
        raise NotImplementedError

    def write_config(self) -> None:
        raise NotImplementedError

    def jvm_args(self) -> list[str]:
        raise NotImplementedError

    def classpath(self) -> str:
        return f"{self.lib}/*"

    def app_args(self) -> list[str]:
        return []

    def probe(self) -> str | None:
        """Return None when ready, else a short reason."""
        raise NotImplementedError

    def after_ready(self) -> None:
        pass

    def endpoints(self) -> str:
        raise NotImplementedError

    # --- lib assembly
    def pom_digest(self) -> str:
        return hashlib.sha256(self.pom.read_bytes()).hexdigest()

    def ensure_lib(self) -> None:
        marker = self.lib / ".kgflow-pom-sha256"
        digest = self.pom_digest()
        if marker.exists() and marker.read_text().strip() == digest:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / "lib.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        say(f"{self.name}: assembling jars from Maven Central into {self.lib} (first run only) ...")
        t0 = time.monotonic()
        cmd = [os.environ.get("KGFLOW_MVN", "mvn"), "-q", "-B", "-f", str(self.pom), DEPENDENCY_PLUGIN,
               "-DincludeScope=runtime", f"-DoutputDirectory={tmp}"]
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
        busy = [f"{k}={p}" for k, p in self.ports().items() if port_open(p, 0.5)]
        if busy:
            raise ServerError(f"{self.name}: port(s) already in use by another process: {', '.join(busy)}")

    def start(self, deadline_s: float) -> float:
        pid = self.read_pid()
        if pid:
            say(f"{self.name}: already running (pid {pid}); checking readiness")
            self.wait_ready(pid, time.monotonic() + deadline_s)
            return 0.0
        self.ensure_lib()
        self.check_ports_free()
        shutil.rmtree(self.run, ignore_errors=True)
        self.run.mkdir(parents=True)
        self.write_config()
        cmd = [java_bin(), f"-Dkgflow.server={self.name}", *self.jvm_args(),
               "-cp", self.classpath(), self.main_class, *self.app_args()]
        (self.run / "command.txt").write_text(" ".join(cmd) + "\n")
        t0 = time.monotonic()
        with open(self.log, "wb") as log:
            proc = subprocess.Popen(cmd, cwd=self.run, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        self.pidfile.write_text(f"{proc.pid}\n")
        say(f"{self.name}: started pid {proc.pid}, log {self.log}")
        try:
            self.wait_ready(proc.pid, t0 + deadline_s, proc)
        except ServerError:
            self.stop(quiet=True)
            raise
        return time.monotonic() - t0

    def wait_ready(self, pid: int, deadline: float, proc: subprocess.Popen | None = None) -> None:
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
                    raise ServerError(f"{self.name}: ready, but post-start setup failed: {e}\n{self.log_tail()}")
                return
            if time.monotonic() > deadline:
                raise ServerError(f"{self.name}: not ready before the deadline ({reason})\n{self.log_tail()}")
            time.sleep(0.5)

    def log_tail(self, n: int = 50) -> str:
        try:
            lines = self.log.read_text(errors="replace").splitlines()[-n:]
        except OSError:
            return "(no log)"
        return f"---- last {len(lines)} lines of {self.log} ----\n" + "\n".join(lines) + "\n----"

    def stop(self, quiet: bool = False) -> bool:
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


def common_jvm_args() -> list[str]:
    return ["-XX:+UseG1GC", "-XX:+ExitOnOutOfMemoryError", "-XX:-OmitStackTraceInFastThrow",
            "-Djava.net.preferIPv4Stack=true", "-Dio.netty.tryReflectionSetAccessible=true"]


class Pulsar(Server):
    name = "pulsar"
    main_class = "org.apache.pulsar.PulsarStandaloneStarter"

    def ports(self):
        return {"broker": env_int("KGFLOW_PULSAR_PORT", 6650),
                "http": env_int("KGFLOW_PULSAR_HTTP_PORT", 8080),
                "bookie": env_int("KGFLOW_PULSAR_BOOKIE_PORT", 3181)}

    def write_config(self):
        p = self.ports()
        conf = self.run / "conf"
        conf.mkdir()
        # Read both as broker (ServiceConfiguration) and bookie (ServerConfiguration) config;
        # everything not listed keeps Pulsar's defaults.
        (conf / "standalone.conf").write_text(f"""\
clusterName=standalone
bindAddress={HOST}
advertisedAddress={HOST}
brokerServicePort={p['broker']}
webServicePort={p['http']}
metadataStoreUrl=
configurationMetadataStoreUrl=
allowAutoTopicCreation=true
allowAutoTopicCreationType=non-partitioned
brokerDeleteInactiveTopicsEnabled=false
managedLedgerDefaultEnsembleSize=1
managedLedgerDefaultWriteQuorum=1
managedLedgerDefaultAckQuorum=1
managedLedgerCacheSizeMB=64
functionsWorkerEnabled=false
webSocketServiceEnabled=false
transactionCoordinatorEnabled=false
systemTopicEnabled=true
topicLevelPoliciesEnabled=true
loadBalancerEnabled=false
brokerShutdownTimeoutMs=3000
exposeTopicLevelMetricsInPrometheus=false
# in-process bookie (BKCluster honours --bookkeeper-port only with allowEphemeralPorts=true;
# otherwise it picks a random free port on all interfaces)
allowEphemeralPorts=true
listeningInterface=lo
journalSyncData=false
journalMaxGroupWaitMSec=1
diskUsageThreshold=0.99
diskUsageWarnThreshold=0.98
dbStorage_writeCacheMaxSizeMb=32
dbStorage_readAheadCacheMaxSizeMb=32
dbStorage_rocksDB_blockCacheSize=16777216
dbStorage_rocksDB_writeBufferSizeMB=8
gcWaitTime=60000
""")
        (conf / "log4j2.xml").write_text("""\
<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <Console name="out" target="SYSTEM_OUT">
      <PatternLayout pattern="%d{ISO8601} %-5level [%t] %c{1} - %msg%n"/>
    </Console>
  </Appenders>
  <Loggers>
    <Logger name="org.apache.bookkeeper" level="warn"/>
    <Logger name="org.apache.pulsar.metadata" level="warn"/>
    <Logger name="org.eclipse.jetty" level="warn"/>
    <Root level="info"><AppenderRef ref="out"/></Root>
  </Loggers>
</Configuration>
""")

    def jvm_args(self):
        opens = ["java.base/java.io", "java.base/java.nio", "java.base/java.lang", "java.base/java.util.zip",
                 "java.base/jdk.internal.misc", "java.base/sun.net", "java.base/jdk.internal.platform",
                 "java.management/sun.management", "jdk.management/com.sun.management.internal"]
        return ["-Xms256m", f"-Xmx{HEAP}", "-XX:MaxDirectMemorySize=512m", *common_jvm_args(),
                f"-Dlog4j2.configurationFile={self.run}/conf/log4j2.xml",
                f"-Dpulsar.log.dir={self.run}/logs", "-Dio.netty.leakDetectionLevel=disabled",
                "-Dzookeeper.admin.enableServer=false",
                *[a for o in opens for a in ("--add-opens", f"{o}=ALL-UNNAMED")]]

    def app_args(self):
        return ["--config", str(self.run / "conf" / "standalone.conf"), "-nfw", "-nss",
                "-a", HOST, "--bookkeeper-port", str(self.ports()["bookie"]),
                "--metadata-dir", str(self.run / "data" / "metadata"),
                "--bookkeeper-dir", str(self.run / "data" / "bookkeeper")]

    def probe(self):
        url = f"http://{HOST}:{self.ports()['http']}/admin/v2/brokers/health"
        try:
            body = http_get(url).strip()
        except urllib.error.HTTPError as e:
            return f"health check HTTP {e.code}"
        return None if body == "ok" else f"health check said {body[:100]!r}"

    def after_ready(self):
        base = f"http://{HOST}:{self.ports()['http']}/admin/v2"
        names = [n.strip() for n in os.environ.get("KGFLOW_PULSAR_NAMESPACES", "kgflow/flow,kgflow/config,kgflow/notify").split(",") if n.strip()]
        for ns in names:
            tenant = ns.split("/")[0]
            http_put_json(f"{base}/tenants/{tenant}", {"allowedClusters": ["standalone"], "adminRoles": []})
            http_put_json(f"{base}/namespaces/{ns}", None)

    def endpoints(self):
        p = self.ports()
        return f"pulsar://{HOST}:{p['broker']} (admin http://{HOST}:{p['http']})"


class Cassandra(Server):
    name = "cassandra"
    main_class = "org.apache.cassandra.service.CassandraDaemon"

    def ports(self):
        return {"cql": env_int("KGFLOW_CASSANDRA_PORT", 9042),
                "storage": env_int("KGFLOW_CASSANDRA_STORAGE_PORT", 7000)}

    def classpath(self):
        return f"{self.run}/conf:{self.lib}/*"

    def write_config(self):
        p = self.ports()
        conf, data = self.run / "conf", self.run / "data"
        conf.mkdir()
        (self.run / "tmp").mkdir()
        (conf / "cassandra.yaml").write_text(f"""\
cluster_name: kgflow
num_tokens: 1
initial_token: 0
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "{HOST}:{p['storage']}"
listen_address: {HOST}
rpc_address: {HOST}
storage_port: {p['storage']}
native_transport_port: {p['cql']}
start_native_transport: true
storage_compatibility_mode: NONE
authenticator: AllowAllAuthenticator
authorizer: AllowAllAuthorizer
data_file_directories: [{data}/data]
commitlog_directory: {data}/commitlog
hints_directory: {data}/hints
saved_caches_directory: {data}/saved_caches
cdc_raw_directory: {data}/cdc_raw
commitlog_sync: periodic
commitlog_sync_period: 10000ms
commitlog_segment_size: 8MiB
commitlog_total_space: 256MiB
memtable_heap_space: 128MiB
memtable_offheap_space: 128MiB
key_cache_size: 16MiB
counter_cache_size: 8MiB
prepared_statements_cache_size: 16MiB
file_cache_size: 64MiB
networking_cache_size: 32MiB
concurrent_reads: 8
concurrent_writes: 8
concurrent_counter_writes: 8
concurrent_compactors: 1
compaction_throughput: 64MiB/s
disk_access_mode: mmap_index_only
hinted_handoff_enabled: false
dynamic_snitch: false
auto_snapshot: false
""")
        (conf / "logback.xml").write_text("""\
<configuration scan="false">
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{ISO8601} %-5level [%thread] %logger{0} - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="STDOUT"/></root>
</configuration>
""")

    def jvm_args(self):
        # From Cassandra 5.0 conf/jvm-server.options + conf/jvm17-server.options.
        exports = ["java.base/jdk.internal.misc", "java.management.rmi/com.sun.jmx.remote.internal.rmi",
                   "java.rmi/sun.rmi.registry", "java.rmi/sun.rmi.server", "java.sql/java.sql",
                   "java.base/java.lang.ref", "jdk.unsupported/sun.misc",
                   "jdk.compiler/com.sun.tools.javac.file", "jdk.attach/sun.tools.attach"]
        opens = ["java.base/java.lang.module", "java.base/jdk.internal.loader", "java.base/jdk.internal.ref",
                 "java.base/jdk.internal.reflect", "java.base/jdk.internal.math", "java.base/jdk.internal.module",
                 "java.base/jdk.internal.util.jar", "jdk.management/com.sun.management.internal",
                 "java.base/sun.nio.ch", "java.base/java.io", "java.base/java.lang.reflect",
                 "jdk.compiler/com.sun.tools.javac", "java.base/java.lang", "java.base/java.util"]
        run = self.run
        return ["-Xms256m", f"-Xmx{HEAP}", "-Xss256k", *common_jvm_args(),
                "-XX:+ParallelRefProcEnabled", "-XX:MaxTenuringThreshold=1", "-XX:G1HeapRegionSize=16m",
                "-XX:G1RSetUpdatingPauseTimePercent=5", "-XX:MaxGCPauseMillis=300",
                "-XX:InitiatingHeapOccupancyPercent=70", "-Djdk.attach.allowAttachSelf=true",
                *[a for e in exports for a in ("--add-exports", f"{e}=ALL-UNNAMED")],
                *[a for o in opens for a in ("--add-opens", f"{o}=ALL-UNNAMED")],
                "-Dio.netty.allocator.useCacheForAllThreads=true", "-Dio.netty.allocator.maxOrder=11",
                f"-Dcassandra.config=file://{run}/conf/cassandra.yaml",
                f"-Dcassandra.storagedir={run}/data", f"-Dcassandra.logdir={run}/logs",
                f"-Dlogback.configurationFile={run}/conf/logback.xml",
                "-Dcassandra-foreground=yes", "-Dcassandra.skip_wait_for_gossip_to_settle=0",
                "-Dcassandra.ring_delay_ms=100", "-Dcassandra.superuser_setup_delay_ms=0",
                f"-Djna.tmpdir={run}/tmp", f"-Djava.io.tmpdir={run}/tmp"]

    def probe(self):
        version = cql_release_version(self.ports()["cql"])
        return None if version else "empty release_version"

    def endpoints(self):
        return f"{HOST}:{self.ports()['cql']} (CQL)"


class Neo4j(Server):
    name = "neo4j"
    main_class = "org.neo4j.server.CommunityEntryPoint"

    def ports(self):
        return {"bolt": env_int("KGFLOW_NEO4J_BOLT_PORT", 7687),
                "http": env_int("KGFLOW_NEO4J_HTTP_PORT", 7474),
                "routing": env_int("KGFLOW_NEO4J_ROUTING_PORT", 7688)}

    def write_config(self):
        p = self.ports()
        conf = self.run / "conf"
        conf.mkdir()
        (conf / "neo4j.conf").write_text(f"""\
dbms.security.auth_enabled=false
server.default_listen_address={HOST}
server.default_advertised_address={HOST}
server.bolt.listen_address={HOST}:{p['bolt']}
server.bolt.advertised_address={HOST}:{p['bolt']}
server.http.listen_address={HOST}:{p['http']}
server.http.advertised_address={HOST}:{p['http']}
server.https.enabled=false
server.routing.listen_address={HOST}:{p['routing']}
server.memory.pagecache.size=256m
server.memory.heap.max_size={HEAP}
db.memory.transaction.total.max=512m
db.tx_log.rotation.retention_policy=2 files
dbms.usage_report.enabled=false
server.logs.gc.enabled=false
""")

    def jvm_args(self):
        # From the defaults Neo4j 5.26's launcher puts in server.jvm.additional.
        return ["-Xms256m", f"-Xmx{HEAP}", *common_jvm_args(), "-XX:+UnlockExperimentalVMOptions",
                "-XX:+TrustFinalNonStaticFields", "-XX:+DisableExplicitGC",
                "-Djdk.nio.maxCachedBufferSize=1024", "-Dlog4j2.disable.jmx=true",
                "--add-opens=java.base/java.nio=ALL-UNNAMED", "--add-opens=java.base/java.io=ALL-UNNAMED",
                "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED"]

    def app_args(self):
        return [f"--home-dir={self.run}", f"--config-dir={self.run}/conf", "--console-mode"]

    def probe(self):
        bolt_return_1(self.ports()["bolt"])
        return None

    def endpoints(self):
        p = self.ports()
        return f"bolt://{HOST}:{p['bolt']} (http://{HOST}:{p['http']})"


CLASSES = {"pulsar": Pulsar, "cassandra": Cassandra, "neo4j": Neo4j}


def run_parallel(servers, fn) -> dict[str, object]:
    results: dict[str, object] = {}

    def work(s):
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


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("start", "stop", "status") or any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    command, names = argv[0], argv[1:] or list(SERVERS)
    unknown = [n for n in names if n not in CLASSES]
    if unknown:
        print(f"unknown server(s): {', '.join(unknown)}; choose from {', '.join(SERVERS)}", file=sys.stderr)
        return 2
    servers = [CLASSES[n]() for n in dict.fromkeys(names)]

    if command == "status":
        return 0 if all([s.status() for s in servers]) else 1

    if command == "stop":
        results = run_parallel(servers, lambda s: s.stop())
        return 0 if all(r is True for r in results.values()) else 1

    deadline = env_int("KGFLOW_SERVERS_TIMEOUT", 240)
    t0 = time.monotonic()
    results = run_parallel(servers, lambda s: s.start(deadline))
    failed = [r for r in results.values() if isinstance(r, Exception)]
    for err in failed:
        say(f"ERROR {err}")
    for s in servers:
        r = results[s.name]
        if not isinstance(r, Exception):
            took = f" (ready after {r:.1f}s)" if r else ""
            say(f"{s.name}: ready at {s.endpoints()}{took}")
    say(f"total {time.monotonic() - t0:.1f}s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
