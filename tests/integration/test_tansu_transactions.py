"""What tansu does with the transaction APIs kcoord's transactional offset commits need.

Raw requests on kcoord's own client, against a real tansu process. Each test asserts what
docs/tansu.md ("Transactional offset commits: what tansu does") reports, so a tansu
upgrade that changes any of it fails here and the doc and docs/transactions.md get revisited.
"""

from __future__ import annotations

import itertools
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kcoord.client import BlockingConnection
from kcoord.client.errors import ConnectionLost
from kcoord.protocol import storage_messages as sm
from kcoord.protocol.record_batch import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    RecordBatch,
    decode_batches,
    encode_batch,
)
from support.broker import TansuBroker

pytestmark = pytest.mark.integration

_ids = itertools.count()
A = sm.AddPartitionsToTxnRequest
P = sm.ProduceRequest
F = sm.FetchRequest
AV = sm.ApiVersionsRequest


@pytest.fixture(scope="module")
def broker() -> Iterator[TansuBroker]:
    with TansuBroker() as b:
        yield b


def connect(broker: TansuBroker) -> BlockingConnection:
    return BlockingConnection((broker.host, broker.port), 10.0)


@pytest.fixture
def conn(broker: TansuBroker) -> Iterator[BlockingConnection]:
    with connect(broker) as c:
        yield c


def compacted_topic(c: BlockingConnection, partitions: int = 2) -> str:
    name = f"txn_probe_{int(time.time() * 1000) % 10**8}_{next(_ids)}"
    T = sm.CreateTopicsRequest
    resp = c.request(T(timeout_ms=5000, topics=[T.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[],
        configs=[T.CreatableTopicConfig(name="cleanup.policy", value="compact")],
    )]))  # fmt: skip
    assert resp.topics[0].error_code == 0
    return name


def init_producer(c: BlockingConnection, txn_id: str) -> tuple[int, int]:
    resp = c.request(sm.InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=60_000))
    assert resp.error_code == 0
    return resp.producer_id, resp.producer_epoch


def add_partition_v3(
    c: BlockingConnection, txn_id: str, pid: int, epoch: int, topic: str, partition: int
) -> int:
    """AddPartitionsToTxn v3, the client form (what kcoord would send for its shard's partition)."""
    resp = c.request(A(
        v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[A.AddPartitionsToTxnTopic(name=topic, partitions=[partition])],
    ), 3)  # fmt: skip
    (topic_result,) = resp.results_by_topic_v3_and_below
    assert topic_result.name == topic
    (part,) = topic_result.results_by_partition
    assert part.partition_index == partition
    return int(part.partition_error_code)


def produce_txn(
    c: BlockingConnection, txn_id: str, pid: int, epoch: int, topic: str, partition: int,
    records: list[tuple[bytes, bytes]], sequence: int = 0,
) -> tuple[int, int]:  # fmt: skip
    """A transactional batch at ``sequence``: (error code, base offset)."""
    batch = encode_batch(records, timestamp=int(time.time() * 1000), producer_id=pid, producer_epoch=epoch,
                         base_sequence=sequence, transactional=True)  # fmt: skip
    resp = c.request(
        P(
            transactional_id=txn_id,
            acks=-1,
            timeout_ms=5000,
            topic_data=[
                P.TopicProduceData(
                    name=topic, partition_data=[P.PartitionProduceData(index=partition, records=batch)]
                )
            ],
        )
    )
    part = resp.responses[0].partition_responses[0]
    return int(part.error_code), int(part.base_offset)


def end_txn(c: BlockingConnection, txn_id: str, pid: int, epoch: int, commit: bool) -> Any:
    return c.request(
        sm.EndTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=commit)
    )


def fetch(c: BlockingConnection, topic: str, partition: int, isolation: int) -> tuple[Any, list[RecordBatch]]:
    resp = c.request(
        F(
            replica_id=-1,
            max_wait_ms=100,
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=isolation,
            topics=[
                F.FetchTopic(
                    topic=topic,
                    partitions=[
                        F.FetchPartition(partition=partition, fetch_offset=0, partition_max_bytes=1 << 20)
                    ],
                )
            ],
        ),
        11,
    )
    part = resp.responses[0].partitions[0]
    assert part.error_code == 0
    return part, decode_batches(part.records or b"")


def add_offsets_to_txn(
    c: BlockingConnection, version: int, txn_id: str, pid: int, epoch: int, group: str
) -> bytes:
    """AddOffsetsToTxn v0-2 by hand (kcoord's codec has no schema for it): the response body."""

    def string(s: str) -> bytes:
        b = s.encode()
        return struct.pack(">h", len(b)) + b

    body = string(txn_id) + struct.pack(">qh", pid, epoch) + string(group)
    header = struct.pack(">hhi", 25, version, 4242 + version) + string("probe")
    payload = c.send_frame(struct.pack(">i", len(header) + len(body)) + header + body)
    assert payload is not None
    assert struct.unpack_from(">i", payload, 0)[0] == 4242 + version
    return payload[4:]


# -- (a) a transactional batch into a compacted topic, (b) its markers ------------------------------
def test_transactional_batches_and_their_markers_on_a_compacted_topic(conn: BlockingConnection) -> None:
    topic = compacted_topic(conn)
    pid1, e1 = init_producer(conn, f"{topic}-commit")
    assert add_partition_v3(conn, f"{topic}-commit", pid1, e1, topic, 0) == 0
    assert produce_txn(conn, f"{topic}-commit", pid1, e1, topic, 0, [(b"k1", b"v1"), (b"k2", b"v2")]) == (
        0,
        0,
    )
    ended = end_txn(conn, f"{topic}-commit", pid1, e1, commit=True)
    assert ended.error_code == 0

    pid2, e2 = init_producer(conn, f"{topic}-abort")
    assert add_partition_v3(conn, f"{topic}-abort", pid2, e2, topic, 0) == 0
    assert produce_txn(conn, f"{topic}-abort", pid2, e2, topic, 0, [(b"k3", b"v3")]) == (0, 3)
    assert end_txn(conn, f"{topic}-abort", pid2, e2, commit=False).error_code == 0

    pid3, e3 = init_producer(conn, f"{topic}-open")
    assert add_partition_v3(conn, f"{topic}-open", pid3, e3, topic, 0) == 0
    assert produce_txn(conn, f"{topic}-open", pid3, e3, topic, 0, [(b"k4", b"v4")]) == (0, 5)

    part, batches = fetch(conn, topic, 0, isolation=0)  # read_uncommitted
    assert (part.high_watermark, part.last_stable_offset) == (
        6,
        5,
    )  # LSO: the open transaction's first offset
    assert part.aborted_transactions in (None, [])  # never filled, even for the aborted transaction at 3
    shape = [(b.base_offset, b.producer_id, b.is_transactional, b.is_control, b.control_type(), len(b.records))
             for b in batches]  # fmt: skip
    assert shape == [
        (0, pid1, True, False, None, 2),
        (2, pid1, True, True, CONTROL_COMMIT, 1),
        (3, pid2, True, False, None, 1),
        (4, pid2, True, True, CONTROL_ABORT, 1),
        (5, pid3, True, False, None, 1),
    ]
    marker = batches[1]
    assert (marker.producer_epoch, marker.base_sequence) == (e1, -1)
    # key: version 0, type 1 (COMMIT); value: version 0, coordinator epoch 0
    assert (marker.records[0][2], marker.records[0][3]) == (b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")

    part, batches = fetch(conn, topic, 0, isolation=1)  # read_committed stops at the LSO...
    assert [b.base_offset for b in batches] == [0, 2, 3, 4]  # ...but still returns the aborted data
    assert part.aborted_transactions in (None, [])


def test_the_sequence_of_a_transactional_producer_continues_across_its_transactions(
    conn: BlockingConnection,
) -> None:
    """kcoord, appending for a client's producer id, must carry that producer's sequence per partition."""
    topic = compacted_topic(conn)
    txn = f"{topic}-seq"
    pid, epoch = init_producer(conn, txn)
    assert add_partition_v3(conn, txn, pid, epoch, topic, 0) == 0
    assert produce_txn(conn, txn, pid, epoch, topic, 0, [(b"a", b"1"), (b"b", b"2")], sequence=0) == (0, 0)
    assert end_txn(conn, txn, pid, epoch, commit=True).error_code == 0
    assert add_partition_v3(conn, txn, pid, epoch, topic, 0) == 0
    assert (
        produce_txn(conn, txn, pid, epoch, topic, 0, [(b"a", b"3")], sequence=0)[0] == 46
    )  # DUPLICATE_SEQUENCE_NUMBER
    assert (
        produce_txn(conn, txn, pid, epoch, topic, 0, [(b"a", b"3")], sequence=5)[0] == 45
    )  # OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce_txn(conn, txn, pid, epoch, topic, 0, [(b"a", b"3")], sequence=2) == (0, 3)
    assert end_txn(conn, txn, pid, epoch, commit=False).error_code == 0
    _, batches = fetch(conn, topic, 0, isolation=0)
    assert [(b.base_offset, b.control_type()) for b in batches] == [
        (0, None),
        (2, CONTROL_COMMIT),
        (3, None),
        (4, CONTROL_ABORT),
    ]


# -- (c) adding a partition on the client's behalf; AddOffsetsToTxn ---------------------------------
def test_a_partition_added_from_another_connection_gets_the_clients_marker(
    broker: TansuBroker, conn: BlockingConnection
) -> None:
    """What kcoord would do: AddPartitionsToTxn v3 (and the transactional Produce) for its own
    partition, with the client's transactional id, producer id and epoch, on kcoord's connection;
    the client's EndTxn on its own connection writes the marker there too."""
    topic = compacted_topic(conn)
    txn = f"{topic}-client"
    pid, epoch = init_producer(conn, txn)
    with connect(broker) as kcoord_side:
        assert add_partition_v3(kcoord_side, txn, pid, epoch, topic, 1) == 0
        assert produce_txn(kcoord_side, txn, pid, epoch, topic, 1, [(b"k", b"v")]) == (0, 0)
    assert end_txn(conn, txn, pid, epoch, commit=True).error_code == 0
    _, batches = fetch(conn, topic, 1, isolation=0)
    assert [(b.base_offset, b.producer_id, b.control_type()) for b in batches] == [
        (0, pid, None),
        (1, pid, CONTROL_COMMIT),
    ]


def test_a_transactional_produce_to_a_partition_never_added_is_accepted_and_gets_no_marker(
    conn: BlockingConnection,
) -> None:
    """Kafka refuses this (the partition is not in the transaction); tansu appends it, and EndTxn
    writes no marker for it: the data stays open for good. kcoord must add its partition first."""
    topic = compacted_topic(conn)
    txn = f"{topic}-unadded"
    pid, epoch = init_producer(conn, txn)
    assert produce_txn(conn, txn, pid, epoch, topic, 0, [(b"k", b"v")]) == (0, 0)
    assert end_txn(conn, txn, pid, epoch, commit=True).error_code == 0
    part, batches = fetch(conn, topic, 0, isolation=0)
    assert [(b.base_offset, b.is_control) for b in batches] == [(0, False)]
    assert (part.high_watermark, part.last_stable_offset) == (1, 1)  # not counted as open either


def test_add_offsets_to_txn_answers_none_and_creates_no_offsets_topic(conn: BlockingConnection) -> None:
    topic = compacted_topic(conn)
    txn = f"{topic}-offsets"
    pid, epoch = init_producer(conn, txn)
    for version in (0, 1, 2):
        assert (
            add_offsets_to_txn(conn, version, txn, pid, epoch, "some-group") == b"\x00\x00\x00\x00\x00\x00"
        )  # throttle 0, error 0
    assert end_txn(conn, txn, pid, epoch, commit=True).error_code == 0
    metadata = conn.request(sm.MetadataRequest(topics=None), 1)
    assert "__consumer_offsets" not in {t.name for t in metadata.topics}


# -- (d) versions and features ------------------------------------------------------------------------
def test_api_versions_advertise_no_transaction_version_feature(conn: BlockingConnection) -> None:
    resp = conn.request(AV(client_software_name="probe", client_software_version="1"), 3)
    versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert versions[22] == (0, 5)  # InitProducerId
    assert versions[24] == (0, 5)  # AddPartitionsToTxn: v4-5 advertised...
    assert versions[25] == (0, 4)  # AddOffsetsToTxn
    assert versions[26] == (0, 4)  # EndTxn: v5 (transaction.version 2) not offered
    assert versions[28] == (0, 4)  # TxnOffsetCommit
    assert not resp.supported_features and not resp.finalized_features  # no transaction.version at all
    assert resp.finalized_features_epoch == -1


@pytest.mark.parametrize("version", [4, 5])
def test_add_partitions_to_txn_v4_plus_closes_the_connection(broker: TansuBroker, version: int) -> None:
    """...but the broker-to-broker form (KIP-890) panics tansu's handler ("not yet implemented")
    and the connection closes with no answer."""
    with connect(broker) as c:
        topic = compacted_topic(c)
        pid, epoch = init_producer(c, f"{topic}-v{version}")
        request = A(transactions=[A.AddPartitionsToTxnTransaction(
            transactional_id=f"{topic}-v{version}", producer_id=pid, producer_epoch=epoch, verify_only=False,
            topics=[A.AddPartitionsToTxnTopic(name=topic, partitions=[0])],
        )])  # fmt: skip
        with pytest.raises(ConnectionLost):
            c.request(request, version)
    with connect(broker) as c:  # the broker itself survives
        assert init_producer(c, f"after-v{version}-{next(_ids)}")[0] > 0
