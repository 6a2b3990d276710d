"""No client can write, delete or alter kcoord's internal topics, or use its cluster group, through
kcoord, whatever the upstream's ACLs let kcoord's own connection do (relay/guard.py, group_guard.py).

One kcoord (``--storage kafka``, its own offsets and event topics) on each upstream; every attack goes
through kcoord with real requests (kafka-python's admin client, a confluent-kafka producer, exact
requests on the wire), each beside an ordinary topic in the same request, which still works. Then
the topics are still there with their partitions, and a restarted kcoord still serves the offset
committed before the attacks.
"""

from __future__ import annotations

import struct
import time
import urllib.request
import uuid
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from kafka import KafkaAdminClient

from kcoord.coordinator.core.records import offset_commit_record
from kcoord.coordinator.runtime.membership import group_id_for
from kcoord.coordinator.runtime.router import shard_for_group
from kcoord.protocol import frames, relay_messages, storage_messages
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.record_batch import encode_batch
from kcoord.protocol.records import encode_record
from kcoord.storage.ownership import transactional_id
from support.kcoord_process import KcoordProcess
from support.ports import free_port
from support.workload import create_topic, unique
from tests.support.fixtures import Upstream
from tests.support.wire import WireClient, commit_offset, fetch_offset

pytestmark = pytest.mark.integration

SHARDS = 4
TOPIC_AUTH = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP_AUTH = ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER_AUTH = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
TXN_AUTH = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def start_kcoord(
    upstream: Upstream, offsets: str, events: str, metrics_port: int, port: int | None = None
) -> KcoordProcess:
    return KcoordProcess(
        "--shards", str(SHARDS), "--storage", "kafka", "--internal-topic", offsets, "--events-topic", events,
        "--metrics", f"127.0.0.1:{metrics_port}",
        bootstrap=upstream.bootstrap, port=port,
    ).start()  # fmt: skip


def exchange(client: WireClient, request: Any, version: int, response_cls: type[Any]) -> Any:
    """One request of a relayed API kcoord does not serve, and its answer, decoded."""
    raw = client.request_frame(request.SCHEMA.api_key, version, request)
    return storage_messages.decode_response(response_cls, version, raw)[1]


def produce_request(topics: dict[tuple[str, int], list[tuple[bytes, bytes | None]]]) -> m.ProduceRequest:
    R = m.ProduceRequest
    now = int(time.time() * 1000)
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), records in topics.items():
        by_topic.setdefault(topic, []).append(
            R.PartitionProduceData(index=partition, records=encode_batch(records, timestamp=now))
        )
    return R(
        acks=-1,
        timeout_ms=10000,
        topic_data=[R.TopicProduceData(name=t, partition_data=p) for t, p in by_topic.items()],
    )


def produce_codes(response: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.index): p.error_code for t in response.responses for p in t.partition_responses}


def partition_counts(bootstrap: str, topics: list[str]) -> dict[str, int]:
    """Reading stays allowed: Metadata of the internal topics through kcoord."""
    with WireClient(bootstrap) as client:
        R = m.MetadataRequest
        answer = client.request(3, 9, R(topics=[R.MetadataRequestTopic(name=t) for t in topics]))
    return {t.name: len(t.partitions) for t in answer.topics if t.error_code == ErrorCode.NONE}


def refused_metric(metrics_port: int) -> dict[tuple[str, str], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("kcoord_relay_refused_total{"):
            labels, value = line[len("kcoord_relay_refused_total{") :].rsplit("} ", 1)
            parts = dict(p.split("=", 1) for p in labels.split(","))
            out[(parts["api"].strip('"'), parts["resource"].strip('"'))] = float(value)
    return out


def test_no_client_can_write_delete_or_alter_kcoords_topics_or_use_its_cluster_group(
    upstream: Upstream,
) -> None:
    tag = uuid.uuid4().hex[:8]
    offsets, events = f"__kcoord_guard_{tag}", f"__kcoord_guard_events_{tag}"
    cluster_group = group_id_for(offsets)
    topic, victim, group = unique("guard-orders"), unique("guard-victim"), unique("guard-group")
    metrics_port = free_port()
    kcoord = start_kcoord(upstream, offsets, events, metrics_port)
    try:
        create_topic(kcoord.bootstrap, topic, 2)
        create_topic(kcoord.bootstrap, victim, 1)
        assert commit_offset(kcoord.bootstrap, group, topic, 5000) == ErrorCode.NONE
        internal_partitions = partition_counts(kcoord.bootstrap, [offsets, events])
        assert internal_partitions[offsets] == SHARDS
        shard = shard_for_group(group, SHARDS)
        now = int(time.time() * 1000)
        forged = encode_record(
            offset_commit_record(
                group, topic, 0, offset=1, leader_epoch=-1, metadata="", commit_timestamp=now
            )
        )

        with WireClient(kcoord.bootstrap) as client:
            offered = {k.api_key: k.max_version for k in client.api_versions().api_keys}
            # Produce: a forged offset commit into the offsets topic and a record into the event topic,
            # beside an ordinary record in the same request, which is written.
            answer = client.request(0, offered[0], produce_request({
                (offsets, shard): [forged], (events, 0): [(b"k", b"forged event")], (topic, 0): [(b"k", b"v")],
            }))  # fmt: skip
            assert produce_codes(answer) == {
                (offsets, shard): TOPIC_AUTH,
                (events, 0): TOPIC_AUTH,
                (topic, 0): 0,
            }

            # AddPartitionsToTxn naming the offsets topic: refused whole, as Kafka refuses it.
            A = storage_messages.AddPartitionsToTxnRequest
            txn = A(v3_and_below_transactional_id="guard-txn", v3_and_below_producer_id=1,
                    v3_and_below_producer_epoch=0,
                    v3_and_below_topics=[A.AddPartitionsToTxnTopic(name=offsets, partitions=[shard]),
                                         A.AddPartitionsToTxnTopic(name=topic, partitions=[0])])  # fmt: skip
            answer = exchange(client, txn, offered[24], storage_messages.AddPartitionsToTxnResponse)
            codes = {(t.name, p.partition_index): p.partition_error_code
                     for t in answer.results_by_topic_v3_and_below for p in t.results_by_partition}  # fmt: skip
            assert codes == {(offsets, shard): TOPIC_AUTH, (topic, 0): ErrorCode.OPERATION_NOT_ATTEMPTED}

            # Configs: retention.ms=1 on the offsets topic, with IncrementalAlterConfigs and AlterConfigs.
            for api_key, request_cls, response_cls in (
                (
                    44,
                    relay_messages.IncrementalAlterConfigsRequest,
                    relay_messages.IncrementalAlterConfigsResponse,
                ),
                (33, relay_messages.AlterConfigsRequest, relay_messages.AlterConfigsResponse),
            ):
                if api_key not in offered:  # nothing to attack with: kcoord does not relay it
                    continue
                C = request_cls
                config = (C.AlterableConfig(name="retention.ms", config_operation=0, value="1") if api_key == 44
                          else C.AlterableConfig(name="retention.ms", value="1"))  # fmt: skip
                request = C(
                    resources=[
                        C.AlterConfigsResource(resource_type=2, resource_name=offsets, configs=[config])
                    ]
                )
                answer = exchange(client, request, offered[api_key], response_cls)
                assert [(r.resource_name, r.error_code) for r in answer.responses] == [(offsets, TOPIC_AUTH)]

            # DeleteRecords up to the high watermark of the shard's partition.
            if 21 in offered:
                D = relay_messages.DeleteRecordsRequest
                request = D(topics=[D.DeleteRecordsTopic(name=offsets, partitions=[D.DeleteRecordsPartition(partition_index=shard, offset=-1)])], timeout_ms=5000)  # fmt: skip
                answer = exchange(client, request, offered[21], relay_messages.DeleteRecordsResponse)
                assert [(t.name, p.error_code) for t in answer.topics for p in t.partitions] == [
                    (offsets, TOPIC_AUTH)
                ]

            # Reassigning the offsets topic, and transaction markers into it: cluster actions.
            if 45 in offered:
                P = relay_messages.AlterPartitionReassignmentsRequest
                request = P(topics=[P.ReassignableTopic(name=offsets, partitions=[P.ReassignablePartition(partition_index=shard, replicas=[1, 2])])])  # fmt: skip
                answer = exchange(
                    client, request, offered[45], relay_messages.AlterPartitionReassignmentsResponse
                )
                assert answer.error_code == CLUSTER_AUTH
            if 27 in offered:
                W = relay_messages.WriteTxnMarkersRequest
                marker = W.WritableTxnMarker(producer_id=1, producer_epoch=0, transaction_result=True, coordinator_epoch=0,
                                             topics=[W.WritableTxnMarkerTopic(name=offsets, partition_indexes=[shard])])  # fmt: skip
                answer = exchange(
                    client, W(markers=[marker]), offered[27], relay_messages.WriteTxnMarkersResponse
                )
                assert {p.error_code for mk in answer.markers for t in mk.topics for p in t.partitions} == {
                    CLUSTER_AUTH
                }

            # The shard's own transactional id: InitProducerId under it would fence the shard.
            shard_txn = transactional_id(offsets, shard)
            init = storage_messages.InitProducerIdRequest
            answer = exchange(client, init(transactional_id=shard_txn, transaction_timeout_ms=60000), offered[22],
                              storage_messages.InitProducerIdResponse)  # fmt: skip
            assert (answer.error_code, answer.producer_id) == (TXN_AUTH, -1)
            request = produce_request({(topic, 0): [(b"k", b"v")]})
            request.transactional_id = shard_txn
            assert produce_codes(client.request(0, offered[0], request)) == {(topic, 0): TXN_AUTH}
            add_offsets = m.AddOffsetsToTxnRequest(
                transactional_id=shard_txn, producer_id=1, producer_epoch=0, group_id=group
            )
            assert client.request(25, 3, add_offsets).error_code == TXN_AUTH

            # The cluster group: joining it, describing it (beside an ordinary group), finding it.
            J = m.JoinGroupRequest
            join = J(group_id=cluster_group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                     protocol_type="consumer", protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"")])  # fmt: skip
            assert client.request(11, 7, join).error_code == GROUP_AUTH
            described = client.request(15, 5, m.DescribeGroupsRequest(groups=[cluster_group, group]))
            assert {g.group_id: g.error_code for g in described.groups} == {
                cluster_group: GROUP_AUTH,
                group: 0,
            }
            found = client.request(10, 3, m.FindCoordinatorRequest(key=cluster_group, key_type=0))
            assert found.error_code == GROUP_AUTH
            assert commit_offset(kcoord.bootstrap, cluster_group, topic, 1) == GROUP_AUTH

        # kafka-python's admin client: DeleteTopics of both internal topics beside an ordinary one,
        # which is deleted; CreatePartitions of the offsets topic.
        admin = KafkaAdminClient(bootstrap_servers=kcoord.bootstrap, request_timeout_ms=20000)
        try:
            deleted = admin.delete_topics([offsets, events, victim], raise_errors=False)
            assert {t["name"]: t["error_code"] for t in deleted["topics"]} == {
                offsets: TOPIC_AUTH, events: TOPIC_AUTH, victim: ErrorCode.NONE,
            }  # fmt: skip
            if 37 in offered:
                grown = admin.create_partitions({offsets: SHARDS * 2}, raise_errors=False)
                assert [(r.name, r.error_code) for r in grown.results] == [(offsets, TOPIC_AUTH)]
        finally:
            admin.close()

        # confluent-kafka (librdkafka): a record for the offsets topic is refused, not delivered.
        reports: list[KafkaError | None] = []
        producer = Producer({"bootstrap.servers": kcoord.bootstrap, "message.timeout.ms": 15000})
        producer.produce(offsets, key=forged[0], value=forged[1], partition=shard,
                         on_delivery=lambda err, _msg: reports.append(err))  # fmt: skip
        assert producer.flush(20) == 0
        assert len(reports) == 1 and reports[0] is not None
        assert reports[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

        # Bad input in a guarded request closes the connection, with a log line: a DeleteTopics v1
        # whose topic array claims more names than it holds, and a Produce cut inside its topics.
        truncated_produce = frames.encode_request(0, 8, 1, "t", produce_request({(topic, 0): [(b"k", b"v")], (victim, 0): [(b"k", b"v")]}))[4:60]  # fmt: skip
        for bad in (
            struct.pack(">hhih", 20, 1, 1, -1) + struct.pack(">i", 5) + b"\x00\x01a",
            truncated_produce,
        ):
            with WireClient(kcoord.bootstrap) as client:
                client.send_bytes(frames.frame(bad))
                assert client.is_closed_by_server()
        closes = [
            line
            for line in kcoord.log_path.read_text(errors="replace").splitlines()
            if "closing connection from" in line
        ]
        assert any("malformed request: array TopicNames" in line for line in closes), closes
        assert any("malformed request: Produce v8 ends inside its topics" in line for line in closes), closes

        # Nothing happened to them; each refusal was counted and logged.
        assert partition_counts(kcoord.bootstrap, [offsets, events]) == internal_partitions
        refused = refused_metric(metrics_port)
        for api in ("Produce", "AddPartitionsToTxn", "DeleteTopics"):  # the topics, by name
            assert refused.get((api, offsets), 0) >= 1, (api, refused)
        assert refused.get(("JoinGroup", cluster_group), 0) == 1
        assert refused.get(("InitProducerId", transactional_id(offsets, shard)), 0) == 1
        log = kcoord.log_path.read_text(errors="replace")
        assert f"refused DeleteTopics on {offsets}, {events}" in log
        # The group's shard still serves (not fenced): it reads 5000 and takes a new commit.
        assert fetch_offset(kcoord.bootstrap, group, topic) == (ErrorCode.NONE, 5000)
        assert commit_offset(kcoord.bootstrap, group, topic, 5001) == ErrorCode.NONE
    finally:
        assert kcoord.stop() == 0

    # A restarted kcoord loads the offsets topic: the last real commit, the forged one never in it.
    kcoord = start_kcoord(upstream, offsets, events, free_port(), port=kcoord.port)
    try:
        assert fetch_offset(kcoord.bootstrap, group, topic) == (ErrorCode.NONE, 5001)
    finally:
        assert kcoord.stop() == 0
