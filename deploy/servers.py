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
data directory on every start (unless KGFLOW_SERVERS_KEEP_DATA=1). `start` waits for real readiness:
    pulsar     GET http://127.0.0.1:<http>/admin/v2/brokers/health answers "ok"
               (then the tenant/namespaces of KGFLOW_PULSAR_NAMESPACES are created)
    cassandra  a CQL `SELECT release_version FROM system.local` over the native protocol
    neo4j      a Bolt `RETURN 1` on database "neo4j"
Only the Python standard library is used (this runs before any venv exists).

Environment variables (defaults in brackets):
    KGFLOW_SERVERS_HOME           cache + run dirs [~/.cache/kgflow/servers]
                                  layout: <home>/<name>/{lib,run,<name>.log,<name>.pid}
    KGFLOW_SERVERS_KEEP_DATA      1: start on the last run's data instead of an empty data
                                  directory (a long build survives a restart) [0]
    KGFLOW_SERVERS_TIMEOUT        readiness deadline per server, seconds [240]
    KGFLOW_SERVERS_STOP_TIMEOUT   seconds between SIGTERM and SIGKILL on stop [45]
    KGFLOW_SERVERS_HEAP           max Java heap of Pulsar and Cassandra [1g]
    KGFLOW_NEO4J_HEAP             Neo4j's Java heap (initial = max) [2g]
    KGFLOW_NEO4J_PAGECACHE        Neo4j's page cache [3g] (what 1M chunks need: docs/distributed.md)
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

import sys
import time

# The implementation is the stdlib-only package deploy/kgservers/ (probes, Server base, one module per
# server); deploy/ (this script's directory) is on sys.path when run as `python3 deploy/servers.py`.
from kgservers import CLASSES, SERVERS, env_int, run_parallel, say


def main(argv: list[str]) -> int:
    """Run `start|stop|status [names]`; the exit status (see the module docstring)."""
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
