"""A kcoord cluster on SASL_SSL in front of Apache Kafka on SASL_SSL, with real processes.

Two kcoord nodes (``cluster.enabled``) with SASL_SSL listeners log in to Kafka's SASL_SSL listener
as ``kcoord`` (SCRAM-SHA-256, TLS checked against the test CA) for their storage, metadata and
cluster membership; clients log in to kcoord as ``alice`` (PLAIN) and kcoord relays that login.

- A transactional producer whose transaction coordinator is the node not serving the group
  commits its offsets: its AddOffsetsToTxn is forwarded to the group's node over TLS, logged in
  as kcoord.
- A confluent-kafka consumer in a group served by one node consumes and commits; that node stops;
  the group's shard moves to the other node and the consumer goes on from its committed offsets
  (nothing read twice, nothing missed) through the remaining node.

Kafka-only: tansu has no SASL users and no TLS listener.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kcoord.coordinator.runtime.router import shard_for_group
from support.certs import OpensslUnavailable, Pki, make_pki
from support.kafka_broker import KafkaBroker, SaslUsers
from support.kcoord_cluster import BASE_NODE_ID, KcoordCluster
from support.workload import unique
from tests.support.fixtures import UPSTREAMS, running_kafka

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        "kafka" not in UPSTREAMS, reason="SASL_SSL is checked by Apache Kafka (tansu has no users or TLS)"
    ),
]

USERS = {"alice": "alice-secret", "kcoord": "kcoord-secret"}
SHARDS = 4
CLUSTER_SESSION_MS = 6000  # Kafka's group.min.session.timeout.ms
SERVED, OTHER = BASE_NODE_ID, BASE_NODE_ID + 1


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    try:
        return make_pki(tmp_path_factory.mktemp("pki"))
    except OpensslUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def kafka_sasl_ssl(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[KafkaBroker]:
    with running_kafka(
        KafkaBroker(log_dir=tmp_path_factory.mktemp("kafka-sasl-ssl"), tls=pki, sasl=SaslUsers(USERS))
    ) as broker:
        yield broker


@pytest.fixture(scope="module")
def cluster(kafka_sasl_ssl: KafkaBroker, pki: Pki) -> Iterator[KcoordCluster]:
    security = (
        "--listener-security-protocol", "SASL_SSL",
        "--ssl-keystore-location", str(pki.server),
        "--ssl-truststore-location", str(pki.ca),  # the CA the nodes check each other against
        "--upstream-security-protocol", "SASL_SSL",
        "--upstream-ssl-truststore-location", str(pki.ca),
        "--upstream-sasl-mechanism", "SCRAM-SHA-256",
        "--upstream-sasl-username", "kcoord",
        "--group-initial-rebalance-delay-ms", "0",
        "--log-level", "DEBUG",
    )  # fmt: skip
    os.environ["KCOORD_UPSTREAM_SASL_PASSWORD"] = USERS["kcoord"]  # the nodes inherit it at start
    nodes = KcoordCluster(
        kafka_sasl_ssl.sasl_ssl_bootstrap,
        size=2,
        shards=SHARDS,
        session_timeout_ms=CLUSTER_SESSION_MS,
        extra=security,
    )
    try:
        nodes.start()
        yield nodes
    finally:
        del os.environ["KCOORD_UPSTREAM_SASL_PASSWORD"]
        nodes.stop()


def alice(bootstrap: str, pki: Pki) -> dict[str, str]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(pki.ca),
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": USERS["alice"],
    }


def create_topic(kafka: KafkaBroker, topic: str, partitions: int) -> None:
    """On Kafka's PLAINTEXT listener: CreateTopics relayed through a just-settled kcoord cluster
    failed now and then with librdkafka's "Broker transport failure" (unexplained so far, and not
    what this module tests)."""
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})  # kept: futures fail once collected
    admin.create_topics([NewTopic(topic, num_partitions=partitions)])[topic].result(30)


def group_served_by(cluster: KcoordCluster, node: int, prefix: str) -> str:
    shards = cluster.latest_view()[node][1]
    return next(g for g in (unique(prefix) for _ in range(10_000)) if shard_for_group(g, SHARDS) in shards)


def produce(client: dict[str, str], topic: str, first: int, count: int) -> None:
    producer = Producer(client)
    for i in range(first, first + count):
        producer.produce(topic, key=str(i), value=str(i))
    assert producer.flush(30) == 0


def consume(consumer: Consumer, count: int, timeout: float = 30.0) -> list[int]:
    got: list[int] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            got.append(int(message.value()))
    return got


def test_forwarded_txn_offsets_reach_the_group_node_over_sasl_ssl(
    kafka_sasl_ssl: KafkaBroker, cluster: KcoordCluster, pki: Pki
) -> None:
    group = group_served_by(cluster, SERVED, "eos-secure")
    client = alice(cluster.bootstrap, pki)
    source, records = unique("eos-secure"), 10
    create_topic(kafka_sasl_ssl, source, 1)
    produce(client, source, 0, records)
    consumer = Consumer({**client, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})  # fmt: skip
    consumer.subscribe([source])
    # The producer knows only the other node: its transaction coordinator is a broker port there.
    producer = Producer({**alice(cluster.nodes[OTHER].bootstrap, pki), "transactional.id": unique("tx")})
    try:
        producer.init_transactions(30)
        got = consume(consumer, records)
        assert len(got) == records
        producer.begin_transaction()
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
        )
        producer.commit_transaction(30)
        committed: list[TopicPartition] = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the commit marker is replayed within the follow interval
            committed = consumer.committed([TopicPartition(source, 0)], timeout=10)
            if committed[0].offset == records:
                break
            time.sleep(0.2)
    finally:
        consumer.close()
    assert committed[0].offset == records
    assert "forwarding" not in cluster.nodes[OTHER].log_path.read_text()  # no forward failed


def test_a_group_moves_to_the_other_node_when_its_node_stops(
    kafka_sasl_ssl: KafkaBroker, cluster: KcoordCluster, pki: Pki
) -> None:
    group = group_served_by(cluster, SERVED, "failover-secure")
    client = alice(cluster.bootstrap, pki)
    topic, half = unique("failover-secure"), 10
    create_topic(kafka_sasl_ssl, topic, 2)
    produce(client, topic, 0, half)
    consumer = Consumer({**client, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 6000})  # fmt: skip
    consumer.subscribe([topic])
    try:
        before = consume(consumer, half)
        assert sorted(before) == list(range(half))
        consumer.commit(asynchronous=False)

        stopped = cluster.nodes[SERVED]
        assert stopped.stop() == 0, stopped.log_tail()
        cluster.wait_for_members({OTHER}, timeout=30)
        survivor = cluster.nodes[OTHER]
        produce(alice(survivor.bootstrap, pki), topic, half, half)
        after = consume(consumer, half)
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition(topic, p) for p in range(2)], timeout=10)
    finally:
        consumer.close()
    # Went on from its committed offsets: the second half once, the first half not again.
    assert sorted(after) == list(range(half, 2 * half))
    assert sum(tp.offset for tp in committed) == 2 * half
    assert f"this node (id {OTHER}) serves {SHARDS} shards" in survivor.log_path.read_text()
    for proc in (stopped, survivor):
        assert proc.log_lines("Traceback") == [], proc.log_tail()
