"""Smoke test of the real servers started by deploy/servers.py (no Docker).

Uses the session `servers` fixture (tests/conftest.py).
"""

from __future__ import annotations

import importlib
import os
import random
import time
import uuid

import pytest

pytestmark = pytest.mark.usefixtures("servers")


def test_pulsar_shared_subscription_and_dead_letter():
    pulsar = __import__("pulsar")
    port = os.environ.get("KGFLOW_PULSAR_PORT", "6650")
    client = pulsar.Client(f"pulsar://127.0.0.1:{port}", operation_timeout_seconds=30)
    try:
        topic = f"persistent://kgflow/flow/smoke:{uuid.uuid4().hex[:8]}"
        consumer = client.subscribe(topic, "svc", consumer_type=pulsar.ConsumerType.Shared)
        client.create_producer(topic).send(b"hello", properties={"id": "1"})
        msg = consumer.receive(timeout_millis=10_000)
        assert msg.data() == b"hello" and msg.properties()["id"] == "1"
        consumer.acknowledge(msg)

        dlq_topic = topic + "-DLQ"
        dlq = client.subscribe(dlq_topic, "dlq", consumer_type=pulsar.ConsumerType.Shared)
        failing = client.subscribe(
            topic,
            "failing",
            consumer_type=pulsar.ConsumerType.Shared,
            negative_ack_redelivery_delay_ms=200,
            dead_letter_policy=pulsar.ConsumerDeadLetterPolicy(max_redeliver_count=2, dead_letter_topic=dlq_topic),
        )
        client.create_producer(topic).send(b"poison")
        counts = []
        for _ in range(3):
            m = failing.receive(timeout_millis=10_000)
            counts.append(m.redelivery_count())
            failing.negative_acknowledge(m)
        assert counts == [0, 1, 2]
        assert dlq.receive(timeout_millis=20_000).data() == b"poison"
    finally:
        client.close()


def test_cassandra_sai_vector_ann():
    cluster_mod = importlib.import_module("cassandra.cluster")
    port = int(os.environ.get("KGFLOW_CASSANDRA_PORT", "9042"))
    cluster = cluster_mod.Cluster(["127.0.0.1"], port=port)
    try:
        s = cluster.connect()
        assert s.execute("SELECT release_version FROM system.local").one().release_version.startswith("5.0")
        s.execute(
            "CREATE KEYSPACE IF NOT EXISTS smoke WITH replication = "
            "{'class': 'SimpleStrategy', 'replication_factor': 1}"
        )
        s.execute("CREATE TABLE IF NOT EXISTS smoke.ents (id text PRIMARY KEY, v vector<float, 384>)")
        s.execute(
            "CREATE CUSTOM INDEX IF NOT EXISTS ents_v ON smoke.ents (v) USING 'StorageAttachedIndex' "
            "WITH OPTIONS = {'similarity_function': 'cosine'}"
        )
        insert = s.prepare("INSERT INTO smoke.ents (id, v) VALUES (?, ?)")
        rnd = random.Random(1)
        vectors = {f"e{i}": [rnd.random() for _ in range(384)] for i in range(30)}
        for key, vec in vectors.items():
            s.execute(insert, (key, vec))
        query = vectors["e7"]
        deadline = time.time() + 60
        while True:  # the SAI index builds in the background
            try:
                rows = list(s.execute(f"SELECT id FROM smoke.ents ORDER BY v ANN OF {query} LIMIT 3"))
                break
            except Exception:
                if time.time() > deadline:
                    raise
                time.sleep(1)
        assert [r.id for r in rows][0] == "e7" and len(rows) == 3
    finally:
        cluster.shutdown()


def test_neo4j_vector_index():
    neo4j = importlib.import_module("neo4j")
    port = os.environ.get("KGFLOW_NEO4J_BOLT_PORT", "7687")
    driver = neo4j.GraphDatabase.driver(f"bolt://127.0.0.1:{port}", auth=None)
    label = "Smoke" + uuid.uuid4().hex[:8]
    try:
        with driver.session(database="neo4j") as s:
            assert s.run("RETURN 1 AS x").single()["x"] == 1
            s.run(
                f"CREATE VECTOR INDEX {label.lower()} IF NOT EXISTS FOR (e:{label}) ON e.v OPTIONS "
                "{indexConfig: {`vector.dimensions`: 3, `vector.similarity_function`: 'cosine'}}"
            ).consume()
            s.run(
                f"UNWIND $rows AS r CREATE (:{label} {{name: r.n, v: r.v}})",
                rows=[
                    {"n": "a", "v": [1.0, 0.0, 0.0]},
                    {"n": "b", "v": [0.0, 1.0, 0.0]},
                    {"n": "c", "v": [0.9, 0.1, 0.0]},
                ],
            ).consume()
            s.run("CALL db.awaitIndexes(300)").consume()
            rows = s.run(
                f"CALL db.index.vector.queryNodes('{label.lower()}', 2, [1.0, 0.0, 0.0]) "
                "YIELD node, score RETURN node.name AS n"
            ).data()
            assert [r["n"] for r in rows] == ["a", "c"]
    finally:
        driver.close()
