"""Pulsar standalone (broker + in-process bookie), metadata in RocksDB, no ZooKeeper."""

from __future__ import annotations

import os
import urllib.error

from .base import Server
from .config import HEAP, HOST, common_jvm_args, env_int
from .probes import http_get, http_put_json

DEFAULT_NAMESPACES = "kgflow/flow,kgflow/config,kgflow/notify"


class Pulsar(Server):
    name = "pulsar"
    main_class = "org.apache.pulsar.PulsarStandaloneStarter"

    def ports(self) -> dict[str, int]:
        return {
            "broker": env_int("KGFLOW_PULSAR_PORT", 6650),
            "http": env_int("KGFLOW_PULSAR_HTTP_PORT", 8080),
            "bookie": env_int("KGFLOW_PULSAR_BOOKIE_PORT", 3181),
        }

    def write_config(self) -> None:
        p = self.ports()
        conf = self.run / "conf"
        conf.mkdir()
        # Read both as broker (ServiceConfiguration) and bookie (ServerConfiguration) config;
        # everything not listed keeps Pulsar's defaults.
        (conf / "standalone.conf").write_text(f"""\
clusterName=standalone
bindAddress={HOST}
advertisedAddress={HOST}
brokerServicePort={p["broker"]}
webServicePort={p["http"]}
metadataStoreUrl=
configurationMetadataStoreUrl=
allowAutoTopicCreation=true
allowAutoTopicCreationType=non-partitioned
brokerDeleteInactiveTopicsEnabled=false
managedLedgerDefaultEnsembleSize=1
managedLedgerDefaultWriteQuorum=1
managedLedgerDefaultAckQuorum=1
managedLedgerCacheSizeMB=64
managedLedgerNewEntriesCheckDelayInMillis=0
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
journalFlushWhenQueueEmpty=true
# requests and responses are both persisted: keep the journal's files small and few (defaults:
# 2 GB each, 5 kept; 15 minutes of benchmark load wrote 1.3 GB)
journalMaxSizeMB=256
journalMaxBackups=1
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

    def jvm_args(self) -> list[str]:
        opens = [
            "java.base/java.io",
            "java.base/java.nio",
            "java.base/java.lang",
            "java.base/java.util.zip",
            "java.base/jdk.internal.misc",
            "java.base/sun.net",
            "java.base/jdk.internal.platform",
            "java.management/sun.management",
            "jdk.management/com.sun.management.internal",
        ]
        return [
            "-Xms256m",
            f"-Xmx{HEAP}",
            "-XX:MaxDirectMemorySize=512m",
            *common_jvm_args(),
            f"-Dlog4j2.configurationFile={self.run}/conf/log4j2.xml",
            f"-Dpulsar.log.dir={self.run}/logs",
            "-Dio.netty.leakDetectionLevel=disabled",
            "-Dzookeeper.admin.enableServer=false",
            *[a for o in opens for a in ("--add-opens", f"{o}=ALL-UNNAMED")],
        ]

    def app_args(self) -> list[str]:
        return [
            "--config",
            str(self.run / "conf" / "standalone.conf"),
            "-nfw",
            "-nss",
            "-a",
            HOST,
            "--bookkeeper-port",
            str(self.ports()["bookie"]),
            "--metadata-dir",
            str(self.run / "data" / "metadata"),
            "--bookkeeper-dir",
            str(self.run / "data" / "bookkeeper"),
        ]

    def probe(self) -> str | None:
        url = f"http://{HOST}:{self.ports()['http']}/admin/v2/brokers/health"
        try:
            body = http_get(url).strip()
        except urllib.error.HTTPError as e:
            return f"health check HTTP {e.code}"
        return None if body == "ok" else f"health check said {body[:100]!r}"

    def after_ready(self) -> None:
        base = f"http://{HOST}:{self.ports()['http']}/admin/v2"
        spec = os.environ.get("KGFLOW_PULSAR_NAMESPACES", DEFAULT_NAMESPACES)
        names = [n.strip() for n in spec.split(",") if n.strip()]
        for ns in names:
            tenant = ns.split("/")[0]
            http_put_json(f"{base}/tenants/{tenant}", {"allowedClusters": ["standalone"], "adminRoles": []})
            http_put_json(f"{base}/namespaces/{ns}", None)

    def endpoints(self) -> str:
        p = self.ports()
        return f"pulsar://{HOST}:{p['broker']} (admin http://{HOST}:{p['http']})"
