"""Cassandra 5 single node (CassandraDaemon in the foreground)."""

from __future__ import annotations

from .base import Server
from .config import HEAP, HOST, common_jvm_args, env_int
from .probes import cql_release_version


class Cassandra(Server):
    name = "cassandra"
    main_class = "org.apache.cassandra.service.CassandraDaemon"

    def ports(self) -> dict[str, int]:
        return {
            "cql": env_int("KGFLOW_CASSANDRA_PORT", 9042),
            "storage": env_int("KGFLOW_CASSANDRA_STORAGE_PORT", 7000),
        }

    def classpath(self) -> str:
        return f"{self.run}/conf:{self.lib}/*"

    def write_config(self) -> None:
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
      - seeds: "{HOST}:{p["storage"]}"
listen_address: {HOST}
rpc_address: {HOST}
storage_port: {p["storage"]}
native_transport_port: {p["cql"]}
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

    def jvm_args(self) -> list[str]:
        # From Cassandra 5.0 conf/jvm-server.options + conf/jvm17-server.options.
        exports = [
            "java.base/jdk.internal.misc",
            "java.management.rmi/com.sun.jmx.remote.internal.rmi",
            "java.rmi/sun.rmi.registry",
            "java.rmi/sun.rmi.server",
            "java.sql/java.sql",
            "java.base/java.lang.ref",
            "jdk.unsupported/sun.misc",
            "jdk.compiler/com.sun.tools.javac.file",
            "jdk.attach/sun.tools.attach",
        ]
        opens = [
            "java.base/java.lang.module",
            "java.base/jdk.internal.loader",
            "java.base/jdk.internal.ref",
            "java.base/jdk.internal.reflect",
            "java.base/jdk.internal.math",
            "java.base/jdk.internal.module",
            "java.base/jdk.internal.util.jar",
            "jdk.management/com.sun.management.internal",
            "java.base/sun.nio.ch",
            "java.base/java.io",
            "java.base/java.lang.reflect",
            "jdk.compiler/com.sun.tools.javac",
            "java.base/java.lang",
            "java.base/java.util",
        ]
        run = self.run
        return [
            "-Xms256m",
            f"-Xmx{HEAP}",
            "-Xss256k",
            *common_jvm_args(),
            "-XX:+ParallelRefProcEnabled",
            "-XX:MaxTenuringThreshold=1",
            "-XX:G1HeapRegionSize=16m",
            "-XX:G1RSetUpdatingPauseTimePercent=5",
            "-XX:MaxGCPauseMillis=300",
            "-XX:InitiatingHeapOccupancyPercent=70",
            "-Djdk.attach.allowAttachSelf=true",
            *[a for e in exports for a in ("--add-exports", f"{e}=ALL-UNNAMED")],
            *[a for o in opens for a in ("--add-opens", f"{o}=ALL-UNNAMED")],
            "-Dio.netty.allocator.useCacheForAllThreads=true",
            "-Dio.netty.allocator.maxOrder=11",
            f"-Dcassandra.config=file://{run}/conf/cassandra.yaml",
            f"-Dcassandra.storagedir={run}/data",
            f"-Dcassandra.logdir={run}/logs",
            f"-Dlogback.configurationFile={run}/conf/logback.xml",
            "-Dcassandra-foreground=yes",
            "-Dcassandra.skip_wait_for_gossip_to_settle=0",
            "-Dcassandra.ring_delay_ms=100",
            "-Dcassandra.superuser_setup_delay_ms=0",
            f"-Djna.tmpdir={run}/tmp",
            f"-Djava.io.tmpdir={run}/tmp",
        ]

    def probe(self) -> str | None:
        version = cql_release_version(self.ports()["cql"])
        return None if version else "empty release_version"

    def endpoints(self) -> str:
        return f"{HOST}:{self.ports()['cql']} (CQL)"
