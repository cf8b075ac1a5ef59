"""Neo4j 5 community (CommunityEntryPoint in console mode), auth disabled.

Memory: what this 24 GiB machine can give Neo4j beside Cassandra, Pulsar and the processors
(docs/distributed.md, "Sizing Neo4j for documents", has what 1M and 10M chunks need, from the
measured bytes per chunk):

- the page cache holds the record stores and range indexes a question walks:
  KGFLOW_NEO4J_PAGECACHE, 3g (a 1M-chunk collection of the benchmark's shape wants ~40g);
- the heap holds queries and transactions (a 500-document write, a question's reads):
  KGFLOW_NEO4J_HEAP, 2g;
- the vector and full-text indexes are Lucene files read through the operating system's file
  cache, outside both: what is left of the machine's memory serves them.
"""

from __future__ import annotations

import os

from .base import Server
from .config import HOST, common_jvm_args, env_int
from .probes import bolt_return_1

PAGECACHE = os.environ.get("KGFLOW_NEO4J_PAGECACHE", "3g")
HEAP = os.environ.get("KGFLOW_NEO4J_HEAP", "2g")


class Neo4j(Server):
    name = "neo4j"
    main_class = "org.neo4j.server.CommunityEntryPoint"

    def ports(self) -> dict[str, int]:
        return {
            "bolt": env_int("KGFLOW_NEO4J_BOLT_PORT", 7687),
            "http": env_int("KGFLOW_NEO4J_HTTP_PORT", 7474),
            "routing": env_int("KGFLOW_NEO4J_ROUTING_PORT", 7688),
        }

    def write_config(self) -> None:
        p = self.ports()
        conf = self.run / "conf"
        conf.mkdir()
        (conf / "neo4j.conf").write_text(f"""\
dbms.security.auth_enabled=false
server.default_listen_address={HOST}
server.default_advertised_address={HOST}
server.bolt.listen_address={HOST}:{p["bolt"]}
server.bolt.advertised_address={HOST}:{p["bolt"]}
server.http.listen_address={HOST}:{p["http"]}
server.http.advertised_address={HOST}:{p["http"]}
server.https.enabled=false
server.routing.listen_address={HOST}:{p["routing"]}
server.memory.pagecache.size={PAGECACHE}
server.memory.heap.initial_size={HEAP}
server.memory.heap.max_size={HEAP}
db.memory.transaction.total.max=1g
db.tx_log.rotation.retention_policy=2 files
dbms.usage_report.enabled=false
server.logs.gc.enabled=false
""")

    def jvm_args(self) -> list[str]:
        # From the defaults Neo4j 5.26's launcher puts in server.jvm.additional.
        return [
            f"-Xms{HEAP}",
            f"-Xmx{HEAP}",
            *common_jvm_args(),
            "-XX:+UnlockExperimentalVMOptions",
            "-XX:+TrustFinalNonStaticFields",
            "-XX:+DisableExplicitGC",
            "-Djdk.nio.maxCachedBufferSize=1024",
            "-Dlog4j2.disable.jmx=true",
            "--add-opens=java.base/java.nio=ALL-UNNAMED",
            "--add-opens=java.base/java.io=ALL-UNNAMED",
            "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
        ]

    def app_args(self) -> list[str]:
        return [f"--home-dir={self.run}", f"--config-dir={self.run}/conf", "--console-mode"]

    def probe(self) -> str | None:
        bolt_return_1(self.ports()["bolt"])
        return None

    def endpoints(self) -> str:
        p = self.ports()
        return f"bolt://{HOST}:{p['bolt']} (http://{HOST}:{p['http']})"
