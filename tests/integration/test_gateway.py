"""Black-box checks of the foundation: kcoord as a process, its upstream broker, stock clients.

What every client meets first: ApiVersions as a client sees it, a
producer and an ``assign()`` consumer moving 10,000 records through kcoord with the bytes intact,
Metadata, DescribeCluster and FindCoordinator naming only kcoord's addresses, and a clean exit on
SIGTERM. What goes through the upstream runs against tansu and Apache Kafka (``kcoord_upstream``);
the rest against kcoord's embedded tansu.
"""

from __future__ import annotations

import re
import struct
import time
from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from support.kcoord_process import KcoordProcess
from support.workload import unique
from tests.support.fixtures import Upstream
from tests.support.wire import WireClient

pytestmark = pytest.mark.integration

GROUP_API_RANGES = {
    10: (0, 6),  # FindCoordinator
    11: (0, 9),  # JoinGroup
    14: (0, 5),  # SyncGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    8: (2, 10),  # OffsetCommit (v10: topic ids)
    9: (1, 10),  # OffsetFetch (v10: topic ids)
    15: (0, 6),  # DescribeGroups
    16: (0, 5),  # ListGroups
    42: (0, 2),  # DeleteGroups
    47: (0, 0),  # OffsetDelete
    18: (0, 4),  # ApiVersions
}


def move_records(bootstrap: str, topic: str, count: int = 10_000, partitions: int = 3) -> list[bytes]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    payloads = [(b"%06d:" % i) + bytes(range(256)) * (i % 3) for i in range(count)]
    for i, value in enumerate(payloads):
        producer.send(topic, key=b"k%d" % i, value=value, partition=i % partitions)
    producer.flush(60)
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    received: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(received) < count and time.monotonic() < deadline:
        for records in consumer.poll(1000).values():
            received.extend(r.value for r in records)
    consumer.close()
    assert sorted(received) == sorted(payloads)
    return received


@pytest.fixture(scope="module")
def kcoord_embedded() -> Iterator[KcoordProcess]:
    with KcoordProcess() as proc:
        yield proc


@pytest.fixture(scope="module")
def kcoord_upstream(upstream: Upstream) -> Iterator[KcoordProcess]:
    """kcoord in front of the session's upstream (tansu, then Kafka), given with --bootstrap-server."""
    with KcoordProcess("--shards", "4", "--storage", "memory", bootstrap=upstream.bootstrap) as proc:
        yield proc


def test_api_versions_report_group_ranges(kcoord_embedded: KcoordProcess) -> None:
    with WireClient(kcoord_embedded.bootstrap) as client:
        resp = client.api_versions()
    assert resp.error_code == 0
    ranges = {a.api_key: (a.min_version, a.max_version) for a in resp.api_keys}
    for key, rng in GROUP_API_RANGES.items():
        assert ranges[key] == rng, key
    assert ranges[68] == ranges[69] == (0, 1)  # KIP-848's ConsumerGroupHeartbeat/Describe, served by kcoord
    assert 0 in ranges and 1 in ranges  # Produce and Fetch come from the upstream


def test_kafka_python_sees_kcoord_versions(kcoord_embedded: KcoordProcess) -> None:
    admin = KafkaAdminClient(bootstrap_servers=kcoord_embedded.bootstrap)
    try:
        versions = admin.api_versions()  # what kafka-python negotiated with kcoord
    finally:
        admin.close()
    ranges = {
        int(k): (v[0], v[1]) if isinstance(v, tuple) else (v.min_version, v.max_version)
        for k, v in versions.items()
    }
    for key, rng in GROUP_API_RANGES.items():
        assert ranges[key] == rng, key


def test_unsupported_api_versions_version_gets_error_35(kcoord_embedded: KcoordProcess) -> None:
    with WireClient(kcoord_embedded.bootstrap) as client:
        raw = client.request_raw(18, 99, b"")
    # A v0 body: error code 35, then our ranges.
    resp = m.ApiVersionsResponse.decode(raw, 0)
    assert resp.error_code == 35
    assert {a.api_key for a in resp.api_keys} >= set(GROUP_API_RANGES)


@pytest.mark.parametrize(("api_key", "version"), [(17, 1), (36, 2)])
def test_sasl_is_not_offered_and_a_sasl_request_closes_the_connection(
    kcoord_embedded: KcoordProcess, api_key: int, version: int
) -> None:
    """tansu offers SaslHandshake and SaslAuthenticate; kcoord, which can
    authenticate nobody, offers neither and treats a request for them as any unoffered API."""
    with WireClient(kcoord_embedded.bootstrap) as client:
        offered = {a.api_key for a in client.api_versions().api_keys}
    assert not {17, 36} & offered, sorted(offered)
    flexible = (api_key, version) == (36, 2)
    header = struct.pack(">hhih", api_key, version, 1, 4) + b"sasl" + (b"\x00" if flexible else b"")
    body = (
        (b"\x06PLAIN\x00" if flexible else struct.pack(">h", 5) + b"PLAIN")
        if api_key == 17
        else (b"\x01\x00" if flexible else struct.pack(">i", 0))
    )
    with WireClient(kcoord_embedded.bootstrap) as client:
        client.send_bytes(frames.frame(header + body))
        assert client.is_closed_by_server()
    assert f"unsupported api {api_key} v{version}" in kcoord_embedded.log_path.read_text()


def test_ten_thousand_records_through_kcoord(kcoord_upstream: KcoordProcess) -> None:
    move_records(kcoord_upstream.bootstrap, unique("gateway-roundtrip"))


def kcoord_ports(proc: KcoordProcess) -> set[int]:
    """kcoord's own port and the ports it serves upstream brokers on (one per broker)."""
    served = re.findall(r"broker \d+ \(.*?\) is served on [\d.]+:(\d+)", proc.log_path.read_text())
    return {proc.port, *(int(p) for p in served)}


def test_metadata_lists_only_kcoord_addresses(kcoord_upstream: KcoordProcess, upstream: Upstream) -> None:
    host, port = kcoord_upstream.bootstrap.split(":")
    for version in (1, 9, 12):
        with WireClient(kcoord_upstream.bootstrap) as client:
            resp = client.request(3, version, m.MetadataRequest(topics=None, allow_auto_topic_creation=False))
        assert resp.brokers, version
        for b in resp.brokers:
            assert b.host == host, (version, b)
            assert b.port in kcoord_ports(kcoord_upstream) and b.port != upstream.port, (version, b)
        assert any(b.port == int(port) for b in resp.brokers)  # kcoord's coordinator node is listed


def test_describe_cluster_lists_only_kcoord_addresses(
    kcoord_upstream: KcoordProcess, upstream: Upstream
) -> None:
    host = kcoord_upstream.bootstrap.split(":")[0]
    with WireClient(kcoord_upstream.bootstrap) as client:
        resp = client.request(60, 0, m.DescribeClusterRequest())
    assert resp.error_code == 0 and resp.brokers
    for b in resp.brokers:
        assert b.host == host and b.port in kcoord_ports(kcoord_upstream) and b.port != upstream.port, b
    if upstream.kind == "kafka":
        assert resp.cluster_id  # relayed as Kafka gave it


def test_find_coordinator_returns_kcoord(kcoord_upstream: KcoordProcess) -> None:
    host, port = kcoord_upstream.bootstrap.split(":")
    with WireClient(kcoord_upstream.bootstrap) as client:
        old = client.request(10, 3, m.FindCoordinatorRequest(key="g1", key_type=0))
        new = client.request(10, 4, m.FindCoordinatorRequest(key_type=0, coordinator_keys=["g1", "g2"]))
        # A transaction coordinator is the upstream's: relayed, with the broker's address rewritten.
        # Kafka answers COORDINATOR_NOT_AVAILABLE while it creates __transaction_state on first use.
        txn_key, deadline = unique("txn"), time.monotonic() + 60
        while True:
            txn = client.request(10, 4, m.FindCoordinatorRequest(key_type=1, coordinator_keys=[txn_key]))
            [t] = txn.coordinators
            if t.error_code != ErrorCode.COORDINATOR_NOT_AVAILABLE or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    assert (old.error_code, old.host, old.port) == (0, host, int(port))
    assert [(c.key, c.host, c.port, c.error_code) for c in new.coordinators] == [
        ("g1", host, int(port), 0),
        ("g2", host, int(port), 0),
    ]
    assert t.error_code == 0, t
    assert (t.host, t.port in kcoord_ports(kcoord_upstream), t.port != int(port)) == (host, True, True), t


def test_sigterm_exits_zero() -> None:
    proc = KcoordProcess().start()
    try:
        with WireClient(proc.bootstrap) as client:
            client.api_versions()
    finally:
        code = proc.stop()
    assert code == 0, proc.log_tail()


def test_sigterm_on_the_embedded_broker_with_clients_connected_exits_promptly() -> None:
    # The embedded tansu exits gracefully once its clients (kcoord's relay and storage connections)
    # are closed; a stop that blocked kcoord's event loop waiting for it held those open, and every
    # shutdown with a client still connected took the full 5 s kill timeout.
    from confluent_kafka import Consumer, Producer

    proc = KcoordProcess().start()
    producer = Producer({"bootstrap.servers": proc.bootstrap, "log_level": 0})
    try:
        producer.produce("gateway-stop", b"x")
        assert producer.flush(30) == 0  # connected to a relayed broker port, and stays so
        consumer = Consumer(
            {
                "bootstrap.servers": proc.bootstrap,
                "group.id": "gateway-stop",
                "auto.offset.reset": "earliest",
                "log_level": 0,
            }
        )
        consumer.subscribe(["gateway-stop"])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                consumer.commit(msg, asynchronous=False)
                break
        else:
            raise AssertionError("the record was not consumed")
        consumer.close()
    finally:
        started = time.monotonic()
        code = proc.stop()
        took = time.monotonic() - started
    assert code == 0, proc.log_tail()
    assert took < 3.0, f"kcoord took {took:.1f} s to stop"


def test_acks_zero_produce_does_not_stall_later_responses(kcoord_upstream: KcoordProcess) -> None:
    from kafka import KafkaAdminClient

    from kcoord.protocol.record_batch import encode_batch
    from kcoord.protocol.storage_messages import ProduceRequest as P

    topic = unique("gateway-acks0")
    admin = KafkaAdminClient(bootstrap_servers=kcoord_upstream.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        admin.close()
    deadline = time.monotonic() + 30
    with WireClient(kcoord_upstream.bootstrap) as probe:  # find the broker port that leads the partition
        # Kafka's CreateTopics answers before every broker's metadata has the new topic's leader.
        while True:
            meta = probe.request(
                3, 9, m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=topic)])
            )
            if (
                meta.topics[0].partitions and meta.topics[0].partitions[0].leader_id >= 0
            ) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    leader = meta.topics[0].partitions[0].leader_id
    broker = next(b for b in meta.brokers if b.node_id == leader)
    batch = encode_batch(
        [(None, b"fire-and-forget-%d" % i) for i in range(10)], timestamp=int(time.time() * 1000)
    )
    produce = P(acks=0, timeout_ms=5000, topic_data=[
        P.TopicProduceData(name=topic, partition_data=[P.PartitionProduceData(index=0, records=batch)])
    ])  # fmt: skip
    with WireClient(f"{broker.host}:{broker.port}") as client:
        for _ in range(3):
            client.send_bytes(frames.encode_request(0, 8, 99, "t", produce))  # no response will come
        # The next request on the same connection is answered at once: acks=0 took no response slot.
        assert client.api_versions().error_code == 0
    consumer = KafkaConsumer(bootstrap_servers=kcoord_upstream.bootstrap, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 30 and time.monotonic() < deadline:
        for records in consumer.poll(500).values():
            got.extend(r.value for r in records)
    consumer.close()
    assert len(got) == 30


def test_upstream_down_closes_clients_and_kcoord_stays_up() -> None:
    from support.broker import TansuBroker

    broker = TansuBroker().start()
    port = broker.port
    with KcoordProcess("--shards", "2", "--storage", "memory", bootstrap=broker.bootstrap) as proc:
        broker.stop()
        with WireClient(proc.bootstrap) as client:
            client.send(3, 9, m.MetadataRequest(topics=None))
            assert client.is_closed_by_server(10)  # a pass-through request cannot be answered
        with WireClient(proc.bootstrap) as client:  # kcoord itself still answers
            assert client.api_versions().error_code == 0
        broker = TansuBroker(port=port).start()  # the broker comes back on the same address
        try:
            with WireClient(proc.bootstrap) as client:
                assert client.request(3, 9, m.MetadataRequest(topics=None)).brokers
        finally:
            broker.stop()


def test_sigterm_exits_promptly_when_the_upstream_is_gone() -> None:
    from support.broker import TansuBroker

    broker = TansuBroker().start()
    proc = KcoordProcess("--shards", "4", "--storage", "kafka", bootstrap=broker.bootstrap).start()
    try:
        broker.stop()
        commit = m.OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[
            m.OffsetCommitRequest.OffsetCommitRequestTopic(name="t", partitions=[
                m.OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])])  # fmt: skip
        with WireClient(proc.bootstrap) as client:  # an append that can never be acknowledged
            client.send(8, 8, commit)
            time.sleep(2)
        started = time.monotonic()
        assert proc.stop(timeout=30) == 0
        assert time.monotonic() - started < 15
    finally:
        proc.kill()
        broker.stop()
