"""KIP-951 leader endpoints never lead a client around kcoord.

Apache Kafka answers a Produce (v10+) or Fetch (v16+) sent to a broker that is no longer the
partition's leader with NOT_LEADER_OR_FOLLOWER and the new leader's address. tansu never does, so
these tests put :class:`~tests.support.fault_upstream.FaultUpstream` behind kcoord: alone (a fake
broker scripted per request) or in front of tansu (real data, with every Nth Produce refused the
way Kafka refuses it). The upstream listens on 127.0.0.2, kcoord on 127.0.0.1, so an upstream
address in what a client receives is visible in the bytes.

The last tests do the same against Apache Kafka itself: two brokers (support.kafka_broker.
KafkaCluster, started by this module only) whose partitions change leader under kcoord while
librdkafka and Java idempotent producers go through it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import struct
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import NewTopic

from kcoord.coordinator.net.relay.addresses import ADDRESS_HANDLING
from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey
from support.broker import probe_metadata_brokers
from support.kafka_broker import KafkaCluster, KafkaUnavailable
from support.kcoord_process import KcoordProcess
from support.ports import free_port_block
from support.workload import create_topic
from tests.support.fault_upstream import KAFKA_40_VERSIONS, FaultUpstream
from tests.support.fixtures import UPSTREAMS
from tests.support.wire import WireClient

pytestmark = pytest.mark.integration

UPSTREAM_HOSTS = (b"127.0.0.2", b"127.0.0.3")
NEW_NODE = 7  # a broker kcoord has never seen in Metadata: it must get a listener of its own


# Where the fake upstream says each node is: node 1 is the fake itself (kcoord relays node 1's
# traffic there); the others are brokers that exist only in these answers.
ADDRESSES: dict[int, tuple[str, int]] = {2: ("127.0.0.3", 9002), NEW_NODE: ("127.0.0.3", 9007)}


@pytest.fixture(scope="module")
def fake() -> Iterator[tuple[FaultUpstream, KcoordProcess]]:
    with FaultUpstream() as upstream:
        ADDRESSES[1] = (upstream.host, upstream.port)
        port = free_port_block(12)
        kcoord = KcoordProcess("--storage", "memory", "--shards", "2", bootstrap=upstream.address, port=port)
        with kcoord:
            yield upstream, kcoord


def broker_port(kcoord: KcoordProcess) -> int:
    """kcoord's port for the fake upstream's node 1, from its Metadata."""
    with WireClient(kcoord.bootstrap) as client:
        meta = client.request(ApiKey.METADATA, 12, m.MetadataRequest(topics=[]))
    ports = {b.node_id: b.port for b in meta.brokers}
    assert all(b.host == "127.0.0.1" for b in meta.brokers), meta.brokers
    return ports[1]


def kcoord_ports(kcoord: KcoordProcess) -> dict[int, int]:
    """Node id -> the kcoord port serving it, from kcoord's log; its own node -> its own port."""
    served = re.findall(r"broker (\d+) \(.*?\) is served on [\d.]+:(\d+)", kcoord.log_path.read_text())
    return {**{int(n): int(p) for n, p in served}, 1_000_000: kcoord.port}


def produce_request(version: int) -> Any:
    R = m.ProduceRequest
    return R(
        transactional_id=None, acks=-1, timeout_ms=1000,
        topic_data=[R.TopicProduceData(name="t", topic_id=uuid.UUID(int=0), partition_data=[
            R.PartitionProduceData(index=0, records=b"")])],
    )  # fmt: skip


def fetch_request(version: int) -> Any:
    R = m.FetchRequest
    return R(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, topics=[R.FetchTopic(topic="t", topic_id=uuid.UUID(int=1), partitions=[
            R.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])],
        forgotten_topics_data=[], rack_id="",
    )  # fmt: skip


def not_leader_produce(node_ids: list[int]) -> Any:
    R = m.ProduceResponse
    return R(
        responses=[R.TopicProduceResponse(name="t", topic_id=uuid.UUID(int=0), partition_responses=[
            R.PartitionProduceResponse(index=0, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER, base_offset=-1,
                                       current_leader=R.LeaderIdAndEpoch(leader_id=node_ids[0], leader_epoch=5))])],
        node_endpoints=[R.NodeEndpoint(node_id=n, host=ADDRESSES[n][0], port=ADDRESSES[n][1], rack=None) for n in node_ids],
    )  # fmt: skip


def not_leader_fetch(node_ids: list[int], records: bytes = b"") -> Any:
    R = m.FetchResponse
    return R(
        responses=[R.FetchableTopicResponse(topic="t", topic_id=uuid.UUID(int=1), partitions=[
            R.PartitionData(partition_index=0, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER, high_watermark=-1,
                            current_leader=R.LeaderIdAndEpoch(leader_id=node_ids[0], leader_epoch=5),
                            records=records)])],
        node_endpoints=[R.NodeEndpoint(node_id=n, host=ADDRESSES[n][0], port=ADDRESSES[n][1], rack="r1") for n in node_ids],
    )  # fmt: skip


def exchange(kcoord: KcoordProcess, api_key: int, version: int, request: Any) -> tuple[bytes, Any]:
    """Send one request on kcoord's port for node 1; the raw response frame and its decoding."""
    with WireClient(f"127.0.0.1:{broker_port(kcoord)}") as client:
        raw = client.request_frame(api_key, version, request)
    return raw, frames.decode_response(api_key, version, raw)[1]


@pytest.mark.parametrize(("api_key", "version"), [(ApiKey.PRODUCE, 10), (ApiKey.PRODUCE, 12),
                                                  (ApiKey.FETCH, 16), (ApiKey.FETCH, 17)])  # fmt: skip
def test_leader_endpoints_name_kcoord_ports_never_the_brokers(
    fake: tuple[FaultUpstream, KcoordProcess], api_key: int, version: int
) -> None:
    upstream, kcoord = fake
    build = not_leader_produce if api_key == ApiKey.PRODUCE else not_leader_fetch
    request = produce_request(version) if api_key == ApiKey.PRODUCE else fetch_request(version)
    upstream.responder = lambda api, v, req: build([1, NEW_NODE])
    raw, response = exchange(kcoord, api_key, version, request)

    for host in UPSTREAM_HOSTS:
        assert host not in raw
    endpoints = {e.node_id: (e.host, e.port) for e in response.node_endpoints}
    assert set(endpoints) == {1, NEW_NODE}
    assert endpoints[1] == ("127.0.0.1", broker_port(kcoord))
    # The broker kcoord had not met before now has a kcoord port of its own, and Metadata agrees
    # once the upstream lists it.
    new_host, new_port = endpoints[NEW_NODE]
    assert new_host == "127.0.0.1" and new_port not in (kcoord.port, broker_port(kcoord))
    # Everything else in the answer is the broker's, unchanged.
    partitions = (
        response.responses[0].partition_responses
        if api_key == ApiKey.PRODUCE
        else response.responses[0].partitions
    )
    assert partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert partitions[0].current_leader.leader_id == 1 and partitions[0].current_leader.leader_epoch == 5


def test_answers_without_endpoints_are_relayed_byte_for_byte(
    fake: tuple[FaultUpstream, KcoordProcess],
) -> None:
    upstream, kcoord = fake
    R = m.FetchResponse
    records = bytes(range(256)) * 64
    answer = R(responses=[R.FetchableTopicResponse(topic_id=uuid.UUID(int=1), partitions=[
        R.PartitionData(partition_index=p, high_watermark=10, records=records) for p in range(3)])])  # fmt: skip
    upstream.responder = lambda api, v, req: answer
    raw, response = exchange(kcoord, ApiKey.FETCH, 17, fetch_request(17))
    assert raw[4:] == answer.encode(17)[0:0] + raw[4:]  # same frame layout
    assert frames.encode_response(ApiKey.FETCH, 17, int.from_bytes(raw[:4], "big"), answer)[4:] == raw
    assert [p.records for p in response.responses[0].partitions] == [records] * 3


def large_fetch(node_ids: list[int], records: bytes, partitions: int) -> Any:
    """A Fetch answer of megabytes: records on every partition but the last, which has moved."""
    R = m.FetchResponse
    parts = [
        R.PartitionData(partition_index=p, high_watermark=10, records=records) for p in range(partitions - 1)
    ]
    leader = node_ids[0] if node_ids else 1
    parts.append(
        R.PartitionData(
            partition_index=partitions - 1,
            error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
            high_watermark=-1,
            current_leader=R.LeaderIdAndEpoch(leader_id=leader, leader_epoch=5),
        )
    )
    return R(responses=[R.FetchableTopicResponse(topic="t", topic_id=uuid.UUID(int=1), partitions=parts)],
             node_endpoints=[R.NodeEndpoint(node_id=n, host=ADDRESSES[n][0], port=ADDRESSES[n][1], rack="r1")
                             for n in node_ids] if node_ids else [])  # fmt: skip


def test_a_large_answer_is_written_while_it_arrives_byte_for_byte(
    fake: tuple[FaultUpstream, KcoordProcess],
) -> None:
    """Cut-through: a slow broker's 2 MB answer reaches the client as it comes, not after its end."""
    upstream, kcoord = fake
    records = bytes(range(256)) * 4096  # 1 MiB
    answer = large_fetch([], records, 3)
    upstream.responder = lambda api, v, req: answer
    upstream.paced_writes = (64 * 1024, 0.02)  # ~32 slices: the answer takes ~0.7 s to leave the broker
    upstream.paced_done_at = 0.0
    try:
        with socket.create_connection(("127.0.0.1", broker_port(kcoord)), timeout=30) as sock:
            sock.sendall(frames.encode_request(ApiKey.FETCH, 16, 77, "cut-through", fetch_request(16)))
            head = sock.recv(8, socket.MSG_WAITALL)
            first_bytes_at = time.monotonic()
            size = int.from_bytes(head[:4], "big")
            body = bytearray(head[4:])
            while len(body) < size:
                chunk = sock.recv(1 << 20)
                assert chunk, "kcoord closed the connection mid-answer"
                body += chunk
        deadline = time.monotonic() + 5
        while not upstream.paced_done_at and time.monotonic() < deadline:  # set by the fake's own thread
            time.sleep(0.01)
        done_at = upstream.paced_done_at
    finally:
        upstream.paced_writes = (0, 0.0)
    assert bytes(body) == frames.encode_response(ApiKey.FETCH, 16, 77, answer)[4:]
    assert done_at - first_bytes_at > 0.3, (
        f"the client's first bytes came {done_at - first_bytes_at:.3f} s before the broker's last: stored, not streamed"
    )


def test_a_streamed_answer_naming_a_leader_keeps_its_length_and_no_broker_address(
    fake: tuple[FaultUpstream, KcoordProcess],
) -> None:
    """A streamed answer's size went out before kcoord saw its NodeEndpoints: the field gives way
    to an unknown tag of the same length, and the client finds the leader through Metadata."""
    upstream, kcoord = fake
    records = bytes(range(256)) * 4096
    answer = large_fetch([1, NEW_NODE], records, 3)
    upstream.responder = lambda api, v, req: answer
    upstream.paced_writes = (256 * 1024, 0.01)
    try:
        raw, response = exchange(kcoord, ApiKey.FETCH, 16, fetch_request(16))
    finally:
        upstream.paced_writes = (0, 0.0)
    sent = frames.encode_response(ApiKey.FETCH, 16, int.from_bytes(raw[:4], "big"), answer)[4:]
    assert len(raw) == len(sent)
    for host in UPSTREAM_HOSTS:
        assert host not in raw
    assert response.node_endpoints == []
    partitions = response.responses[0].partitions
    assert [p.records for p in partitions[:2]] == [records, records]
    assert partitions[2].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert partitions[2].current_leader.leader_id == 1 and partitions[2].current_leader.leader_epoch == 5
    # Everything before the root's tagged fields is the broker's, byte for byte.
    tags_at = m.FetchResponse.tag_section(raw, frames.skip_tagged_fields(raw, 4), 16)
    assert tags_at is not None and raw[:tags_at] == sent[:tags_at]


def read_frame(sock: socket.socket) -> bytes:
    size = int.from_bytes(sock.recv(4, socket.MSG_WAITALL), "big")
    body = bytearray()
    while len(body) < size:
        chunk = sock.recv(size - len(body))
        assert chunk, "kcoord closed the connection mid-answer"
        body += chunk
    return bytes(body)


def test_a_large_answer_behind_a_parked_join_waits_its_turn_whole_and_rewritten(
    fake: tuple[FaultUpstream, KcoordProcess],
) -> None:
    """Only the next answer to be written is streamed: one that arrives behind a parked JoinGroup
    waits whole, in order, and its endpoints are rewritten to kcoord's as any small answer's."""
    upstream, kcoord = fake
    records = bytes(range(256)) * 4096
    answer = large_fetch([1, NEW_NODE], records, 3)
    upstream.responder = lambda api, v, req: answer
    upstream.paced_writes = (256 * 1024, 0.01)
    join = m.JoinGroupRequest(group_id="parked-before-fetch", session_timeout_ms=10_000, member_id="",
                              protocol_type="consumer", rebalance_timeout_ms=10_000, protocols=[
                                  m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")])  # fmt: skip
    try:
        with socket.create_connection(("127.0.0.1", broker_port(kcoord)), timeout=30) as sock:
            # v3: no member-id round trip (KIP-394), so the join parks for the initial rebalance delay.
            sock.sendall(
                frames.encode_request(ApiKey.JOIN_GROUP, 3, 1, "parked", join)
                + frames.encode_request(ApiKey.FETCH, 16, 2, "parked", fetch_request(16))
            )
            first, second = read_frame(sock), read_frame(sock)
    finally:
        upstream.paced_writes = (0, 0.0)
    cid, joined = frames.decode_response(ApiKey.JOIN_GROUP, 3, first)
    assert cid == 1 and joined.error_code == 0
    cid, fetched = frames.decode_response(ApiKey.FETCH, 16, second)
    assert cid == 2
    for host in UPSTREAM_HOSTS:
        assert host not in second
    assert {e.node_id for e in fetched.node_endpoints} == {1, NEW_NODE}  # rewritten, not dropped
    assert all(e.host == "127.0.0.1" for e in fetched.node_endpoints)
    assert [p.records for p in fetched.responses[0].partitions[:2]] == [records, records]


def test_every_address_carrying_api_kcoord_advertises_is_covered(
    fake: tuple[FaultUpstream, KcoordProcess],
) -> None:
    """What kcoord offers a client, against an upstream offering Kafka 4.0's ranges: every API
    whose answers can hold an address is either rewritten in every offered version or offered
    only in versions without addresses."""
    _, kcoord = fake
    with WireClient(kcoord.bootstrap) as client:
        resp = client.request(
            ApiKey.API_VERSIONS,
            3,
            m.ApiVersionsRequest(client_software_name="t", client_software_version="1"),
        )
    offered = {a.api_key: (a.min_version, a.max_version) for a in resp.api_keys}
    assert offered[ApiKey.PRODUCE] == KAFKA_40_VERSIONS[ApiKey.PRODUCE]
    assert offered[ApiKey.FETCH] == KAFKA_40_VERSIONS[ApiKey.FETCH]
    assert offered[55] == (0, 1)  # DescribeQuorum v2 names controllers by address
    assert offered[68] == offered[69] == (0, 1)  # KIP-848's group APIs: served by kcoord itself
    assert not {78, 79, 88, 89} & set(offered)  # share and streams groups: not served
    assert set(offered) & set(ADDRESS_HANDLING) <= {0, 1, 3, 10, 55, 60}


# -- property: no relayed answer of an advertised API names an upstream address -------------------

NODE_IDS = st.sampled_from([1, 2, NEW_NODE])
RACKS = st.none() | st.just("r1")


def _endpoints(cls: Any) -> st.SearchStrategy[list[Any]]:
    return st.lists(
        st.builds(lambda n, rack: cls.NodeEndpoint(node_id=n, host=ADDRESSES[n][0], port=ADDRESSES[n][1], rack=rack), NODE_IDS, RACKS),
        max_size=3, unique_by=lambda e: e.node_id,
    )  # fmt: skip


@st.composite
def relayed_exchange(draw: st.DrawFn) -> tuple[int, int, Any, Any]:
    """(api key, version, request, the upstream's answer full of upstream addresses)."""
    api_key = draw(st.sampled_from([ApiKey.METADATA, ApiKey.DESCRIBE_CLUSTER, ApiKey.FIND_COORDINATOR,
                                    ApiKey.PRODUCE, ApiKey.FETCH]))  # fmt: skip
    if api_key == ApiKey.METADATA:
        version = draw(st.integers(0, 12))
        R = m.MetadataResponse
        nodes = draw(st.lists(NODE_IDS, min_size=1, max_size=3, unique=True))
        answer = R(brokers=[R.MetadataResponseBroker(node_id=n, host=ADDRESSES[n][0], port=ADDRESSES[n][1]) for n in nodes],
                   controller_id=nodes[0], topics=[])  # fmt: skip
        return api_key, version, m.MetadataRequest(topics=[]), answer
    if api_key == ApiKey.DESCRIBE_CLUSTER:
        version = draw(st.integers(0, 1))
        R = m.DescribeClusterResponse
        nodes = draw(st.lists(NODE_IDS, min_size=1, max_size=3, unique=True))
        answer = R(brokers=[R.DescribeClusterBroker(broker_id=n, host=ADDRESSES[n][0], port=ADDRESSES[n][1]) for n in nodes],
                   cluster_id="c", controller_id=nodes[0])  # fmt: skip
        return api_key, version, m.DescribeClusterRequest(), answer
    if api_key == ApiKey.FIND_COORDINATOR:
        version = draw(st.integers(1, 6))
        R = m.FindCoordinatorResponse
        n = draw(NODE_IDS)
        if version >= 4:
            request = m.FindCoordinatorRequest(key_type=1, coordinator_keys=["txn"])
            answer = R(
                coordinators=[R.Coordinator(key="txn", node_id=n, host=ADDRESSES[n][0], port=ADDRESSES[n][1])]
            )
        else:
            request = m.FindCoordinatorRequest(key="txn", key_type=1)
            answer = R(node_id=n, host=ADDRESSES[n][0], port=ADDRESSES[n][1])
        return api_key, version, request, answer
    records = draw(st.binary(max_size=64))
    if api_key == ApiKey.PRODUCE:
        version = draw(st.integers(3, 12))
        R = m.ProduceResponse
        answer = not_leader_produce([1])
        answer.node_endpoints = draw(_endpoints(R)) if version >= 10 else []
        return api_key, version, produce_request(version), answer
    version = draw(st.integers(4, 17))
    R = m.FetchResponse
    answer = not_leader_fetch([1], records)
    answer.node_endpoints = draw(_endpoints(R)) if version >= 16 else []
    return api_key, version, fetch_request(version), answer


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=relayed_exchange())
def test_no_relayed_answer_names_an_upstream_address(
    fake: tuple[FaultUpstream, KcoordProcess], case: tuple[int, int, Any, Any]
) -> None:
    upstream, kcoord = fake
    api_key, version, request, answer = case
    upstream.responder = lambda api, v, req: answer
    raw, response = exchange(kcoord, api_key, version, request)
    for host in UPSTREAM_HOSTS:
        assert host not in raw, (api_key, version)
    if api_key == ApiKey.METADATA:
        addresses = [(b.node_id, b.host, b.port) for b in response.brokers]
    elif api_key == ApiKey.DESCRIBE_CLUSTER:
        addresses = [(b.broker_id, b.host, b.port) for b in response.brokers]
    elif api_key == ApiKey.FIND_COORDINATOR:
        addresses = [
            (c.node_id, c.host, c.port) for c in (response.coordinators if version >= 4 else [response])
        ]
    else:
        addresses = [(e.node_id, e.host, e.port) for e in response.node_endpoints]
        assert [e.node_id for e in response.node_endpoints] == [e.node_id for e in answer.node_endpoints]
    ours = kcoord_ports(kcoord)
    assert all((host, port) == ("127.0.0.1", ours[node]) for node, host, port in addresses), addresses


def test_a_taken_broker_port_costs_no_client_its_connection() -> None:
    """The port kcoord would derive for a newly met broker (listen port + 1 + n) may be held by
    another socket (those ports can be handed out as ephemeral ports): kcoord serves that broker
    on a port the OS picks, and the client that brought the news keeps its connection."""
    with FaultUpstream() as upstream:
        ADDRESSES[1] = (upstream.host, upstream.port)
        port = free_port_block(4)
        with (
            socket.socket() as squatter,
            KcoordProcess(
                "--storage", "memory", "--shards", "1", bootstrap=upstream.address, port=port
            ) as kcoord,
        ):
            squatter.bind(("127.0.0.1", port + 2))  # node 1 got port + 1 at start; the next broker's is taken
            squatter.listen()
            R = m.DescribeClusterResponse
            upstream.responder = lambda api, v, req: R(
                cluster_id="c",
                controller_id=1,
                brokers=[
                    R.DescribeClusterBroker(broker_id=n, host=ADDRESSES[n][0], port=ADDRESSES[n][1])
                    for n in (1, 2)
                ],
            )
            with WireClient(f"127.0.0.1:{broker_port(kcoord)}") as client:
                first = client.request(ApiKey.DESCRIBE_CLUSTER, 1, m.DescribeClusterRequest())
                again = client.request(
                    ApiKey.DESCRIBE_CLUSTER, 1, m.DescribeClusterRequest()
                )  # same connection
            ports = {b.broker_id: b.port for b in first.brokers}
            assert ports[1] == port + 1 and ports[2] not in (port, port + 1, port + 2)
            assert {b.broker_id: b.port for b in again.brokers} == ports
            assert kcoord_ports(kcoord)[2] == ports[2]
            socket.create_connection(("127.0.0.1", ports[2]), timeout=5).close()  # and it listens there
            assert f"port {port + 2} for broker 2 is taken" in kcoord.log_path.read_text()


# -- KIP-848 APIs ------------------------------------------------------------------------------------


def test_consumer_group_apis_are_served_by_kcoord_and_the_connection_stays(
    fake: tuple[FaultUpstream, KcoordProcess],
) -> None:
    """kcoord serves ConsumerGroupHeartbeat/Describe itself (the fake upstream offers neither)."""
    _, kcoord = fake
    with WireClient(kcoord.bootstrap) as client:
        hb = client.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, m.ConsumerGroupHeartbeatRequest(
            group_id="g", member_id="", member_epoch=0, rebalance_timeout_ms=30000, subscribed_topic_names=["t"],
            topic_partitions=[]))  # fmt: skip
        assert hb.error_code == ErrorCode.NONE and hb.member_id and hb.member_epoch == 1
        desc = client.request(
            ApiKey.CONSUMER_GROUP_DESCRIBE, 0, m.ConsumerGroupDescribeRequest(group_ids=["g", "b"])
        )
        assert [(g.group_id, g.error_code) for g in desc.groups] == [
            ("g", 0),
            ("b", ErrorCode.GROUP_ID_NOT_FOUND),
        ]
        # Same connection, still served.
        meta = client.request(ApiKey.METADATA, 12, m.MetadataRequest(topics=[]))
        assert meta.brokers
    assert "malformed request" not in kcoord.log_path.read_text()


# -- real data through leader changes: nothing lost, nothing written twice ------------------------

RECORDS = 100_000


@pytest.fixture
def faulty_cluster(tansu: Any) -> Iterator[tuple[FaultUpstream, KcoordProcess]]:
    """kcoord in front of tansu, with every 5th Produce refused the way Kafka refuses one sent to
    a broker that just lost the partition's leadership."""
    host, port = tansu.bootstrap.rsplit(":", 1)
    upstream = FaultUpstream(target=(host, int(port)), node_id=tansu_node_id(tansu))
    with (
        upstream,
        KcoordProcess("--storage", "memory", "--shards", "2", bootstrap=upstream.address) as kcoord,
    ):
        upstream.fault_produce_every = 5
        yield upstream, kcoord


def tansu_node_id(tansu: Any) -> int:
    host, port = tansu.bootstrap.rsplit(":", 1)
    return probe_metadata_brokers(host, int(port))[0][0]


def count_keys(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    """Every record key in ``topic``, read through kcoord from the start to the end of each partition."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "counter", "enable.partition.eof": True,
        "enable.auto.commit": False,
    })  # fmt: skip
    consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                     for p in range(partitions)])  # fmt: skip
    keys: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 120
    try:
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"read {len(keys)} records, ends of {sorted(at_end)} only"
            for msg in consumer.consume(10_000, 1.0):
                if msg.error() is None:
                    keys.append(msg.key())
                    at_end.discard(msg.partition())
                elif msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                else:
                    raise AssertionError(msg.error())
    finally:
        consumer.close()
    return keys


def assert_exactly_once(upstream: FaultUpstream, kcoord: KcoordProcess, topic: str, key_prefix: str) -> None:
    keys = count_keys(kcoord.bootstrap, topic, 3)
    print(f"{topic}: {len(keys)} records stored, {upstream.faults['produce']} Produce requests refused")
    assert len(keys) == RECORDS, f"{len(keys)} records stored for {RECORDS} produced"
    assert set(keys) == {f"{key_prefix}{i:06d}".encode() for i in range(RECORDS)}
    assert upstream.faults["produce"] > 10, upstream.faults
    # Only kcoord itself ever spoke to the upstream: no client was sent around it.
    assert set(upstream.software_names) == {"kcoord"}, upstream.software_names


def test_librdkafka_idempotent_producer_through_leader_changes_stores_each_record_once(
    faulty_cluster: tuple[FaultUpstream, KcoordProcess],
) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    upstream, kcoord = faulty_cluster
    topic = f"kip951-rdkafka-{uuid.uuid4().hex[:8]}"
    create_topic(kcoord.bootstrap, topic, 3)
    failures: list[Any] = []
    producer = confluent_kafka.Producer({
        "bootstrap.servers": kcoord.bootstrap, "enable.idempotence": True, "linger.ms": 5,
        "batch.num.messages": 500,  # a few hundred Produce requests, so dozens are refused
    })  # fmt: skip
    for i in range(RECORDS):
        while True:
            try:
                producer.produce(topic, key=b"r%06d" % i, value=b"value-%d" % i,
                                 on_delivery=lambda err, msg: err is not None and failures.append(err))  # fmt: skip
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(120) == 0
    assert not failures, failures[:3]
    assert_exactly_once(upstream, kcoord, topic, "r")


def test_java_producer_through_leader_changes_stores_each_record_once(
    faulty_cluster: tuple[FaultUpstream, KcoordProcess],
    java_peer: Any,
) -> None:
    upstream, kcoord = faulty_cluster
    topic = f"kip951-java-{uuid.uuid4().hex[:8]}"
    create_topic(kcoord.bootstrap, topic, 3)
    peer = java_peer("ProducerPeer", ["--bootstrap", kcoord.bootstrap, "--topic", topic,
                                      "--count", str(RECORDS), "--key-prefix", "j"])  # fmt: skip
    assert peer.wait_exit(180) == 0, peer.stderr_tail()
    produced = peer.latest("produced")
    assert produced is not None and produced["acked"] == RECORDS and produced["failed"] == 0, produced
    assert_exactly_once(upstream, kcoord, topic, "j")


# -- Apache Kafka: two brokers, a partition's leadership moved while clients go through kcoord ----
# The brokers listen on 127.0.0.2 and 127.0.0.3 (KafkaCluster), kcoord on 127.0.0.1: an upstream
# address reaching a client is visible in its bytes, its librdkafka statistics or its sockets.

KAFKA_HOSTS = ("127.0.0.2", "127.0.0.3")
FLIP_RECORDS = 30_000


@pytest.fixture(scope="module")
def kafka_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KafkaCluster, KcoordProcess]]:
    """Two Kafka brokers (started only for these tests, ~10 s) and kcoord relaying to them."""
    if "kafka" not in UPSTREAMS:
        pytest.skip(f"KCOORD_TEST_UPSTREAMS={','.join(UPSTREAMS)} leaves Apache Kafka out")
    try:
        cluster = KafkaCluster(2, log_dir=tmp_path_factory.mktemp("kafka-pair"), hosts=KAFKA_HOSTS)
        cluster.start()
    except KafkaUnavailable as exc:
        pytest.skip(str(exc))
    try:
        with KcoordProcess(
            "--storage", "memory", "--shards", "2", bootstrap=cluster.brokers[0].bootstrap
        ) as kcoord:
            yield cluster, kcoord
    finally:
        cluster.stop()


class LeaderFlipper(threading.Thread):
    """Moves the leadership of every partition of ``topic`` to its other replica, again and again
    (the replica order reversed, then a preferred-leader election), straight on the cluster."""

    def __init__(self, cluster: KafkaCluster, topic: str, partitions: int, interval: float = 0.3) -> None:
        super().__init__(daemon=True)
        self.admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        self.topic, self.partitions, self.interval = topic, partitions, interval
        self.replicas = {p: [1 + p % 2, 2 - p % 2] for p in range(partitions)}
        self.stop_flag = threading.Event()
        self.moves = 0  # partition leader changes the cluster's metadata showed
        self.failure: BaseException | None = None

    def flip(self, timeout: float = 10.0) -> None:
        """One move of every partition; returns once the cluster's metadata shows each new leader
        (the election is repeated until then: it fails while the reordering is still being applied)."""
        for p in self.replicas:
            self.replicas[p].reverse()
        self.admin.alter_partition_reassignments(
            {TopicPartition(self.topic, p): r for p, r in self.replicas.items()}
        )
        wanted = {p: r[0] for p, r in self.replicas.items()}
        deadline = time.monotonic() + timeout
        while True:
            self.admin.elect_leaders(0, {self.topic: list(self.replicas)}, raise_errors=False)
            leaders = self.leaders()
            if leaders == wanted:
                break
            assert time.monotonic() < deadline, f"leaders {leaders}, wanted {wanted}"
            time.sleep(0.1)
        self.moves += len(wanted)

    def leaders(self) -> dict[int, int]:
        [described] = self.admin.describe_topics([self.topic])
        return {p["partition_index"]: p["leader_id"] for p in described["partitions"]}

    def run(self) -> None:
        try:
            while not self.stop_flag.wait(self.interval):
                self.flip()
        except BaseException as exc:  # reported by the test
            self.failure = exc

    def finish(self) -> int:
        self.stop_flag.set()
        self.join(30)
        self.admin.close()
        assert self.failure is None, self.failure
        return self.moves


def create_replicated_topic(cluster: KafkaCluster, topic: str, partitions: int) -> None:
    """``partitions`` partitions on both brokers, their leaders alternating between them."""
    place_topic(cluster, topic, {p: [1 + p % 2, 2 - p % 2] for p in range(partitions)}, create=True)


def place_topic(
    cluster: KafkaCluster, topic: str, replicas: dict[int, list[int]], create: bool = False
) -> None:
    """Create ``topic`` with, or move it to, these replicas (the first one leads); returns once the
    cluster's metadata shows them all in sync with the first one leading."""
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        if create:
            admin.create_topics([NewTopic(topic, replica_assignments=replicas)])
        else:
            admin.alter_partition_reassignments({TopicPartition(topic, p): r for p, r in replicas.items()})
        deadline = time.monotonic() + 30
        while True:
            described = admin.describe_topics([topic])[0]
            placed = {p["partition_index"]: (p["leader_id"], sorted(p["replica_nodes"]), sorted(p["isr_nodes"]))
                      for p in described["partitions"]}  # fmt: skip
            if described["error_code"] == 0 and placed == {
                p: (r[0], sorted(r), sorted(r)) for p, r in replicas.items()
            }:
                return
            assert time.monotonic() < deadline, described
            time.sleep(0.1)
    finally:
        admin.close()


def upstream_hosts_of(pid: int) -> set[str]:
    """Remote hosts of process ``pid``'s TCP sockets that are Kafka's (KAFKA_HOSTS), from /proc."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    hosts = set()
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[9] in inodes:
            host = socket.inet_ntoa(struct.pack("<I", int(fields[2].split(":")[0], 16)))
            if host in KAFKA_HOSTS:
                hosts.add(f"{host}:{int(fields[2].split(':')[1], 16)}")
    return hosts


def test_kafka_answers_a_request_to_the_old_leader_with_kcoord_addresses(
    kafka_pair: tuple[KafkaCluster, KcoordProcess],
) -> None:
    """Real Kafka's KIP-951 answers (NOT_LEADER_OR_FOLLOWER, CurrentLeader, NodeEndpoints) to a
    Produce v11 and a Fetch v16 sent to the broker the partition just moved away from: relayed
    with the new leader at its kcoord port, no upstream address in the bytes. (The partition moves
    off broker 1 entirely: Kafka serves a consumer's Fetch v11+ from a follower, KIP-392.)"""
    from kcoord.protocol.record_batch import encode_batch

    cluster, kcoord = kafka_pair
    topic = f"kip951-wire-{uuid.uuid4().hex[:8]}"
    place_topic(cluster, topic, {0: [1]}, create=True)
    place_topic(cluster, topic, {0: [2]})
    with WireClient(kcoord.bootstrap) as client:
        meta = client.request(
            ApiKey.METADATA,
            12,
            m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=topic)]),
        )
    topic_id = meta.topics[0].topic_id
    ports = kcoord_ports(kcoord)
    assert set(ports) >= {1, 2}, ports

    P = m.ProduceRequest
    batch = encode_batch([(b"k", b"v")], timestamp=int(time.time() * 1000))
    produce = P(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        P.TopicProduceData(name=topic, partition_data=[P.PartitionProduceData(index=0, records=batch)])])  # fmt: skip
    F = m.FetchRequest
    fetch = F(replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
              session_epoch=-1, topics=[F.FetchTopic(topic=topic, topic_id=topic_id, partitions=[
                  F.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])],
              forgotten_topics_data=[], rack_id="")  # fmt: skip
    for api_key, version, request in ((ApiKey.PRODUCE, 11, produce), (ApiKey.FETCH, 16, fetch)):
        deadline = time.monotonic() + 10
        while True:  # broker 1 learns of the move through the controller's metadata log
            with WireClient(f"127.0.0.1:{ports[1]}") as client:
                raw = client.request_frame(api_key, version, request)
            response = frames.decode_response(api_key, version, raw)[1]
            partition = (response.responses[0].partition_responses if api_key == ApiKey.PRODUCE
                         else response.responses[0].partitions)[0]  # fmt: skip
            if partition.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and response.node_endpoints:
                break
            assert time.monotonic() < deadline, (api_key, partition)
            time.sleep(0.1)
        for host in KAFKA_HOSTS:
            assert host.encode() not in raw, (api_key, raw)
        assert partition.current_leader.leader_id == 2, (api_key, partition)
        assert [(e.node_id, e.host, e.port) for e in response.node_endpoints] == [(2, "127.0.0.1", ports[2])]


def test_librdkafka_idempotent_producer_through_kafka_leader_moves_stores_each_record_once(
    kafka_pair: tuple[KafkaCluster, KcoordProcess],
) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    cluster, kcoord = kafka_pair
    topic = f"kip951-kafka-rdkafka-{uuid.uuid4().hex[:8]}"
    create_replicated_topic(cluster, topic, 3)
    broker_names: set[str] = set()

    def stats(text: str) -> None:
        broker_names.update(b["name"] for b in json.loads(text)["brokers"].values() if b["nodeid"] >= 0)

    failures: list[Any] = []
    producer = confluent_kafka.Producer({
        "bootstrap.servers": kcoord.bootstrap, "enable.idempotence": True, "linger.ms": 5,
        "statistics.interval.ms": 500, "stats_cb": stats,
    })  # fmt: skip
    flipper = LeaderFlipper(cluster, topic, 3)
    flipper.start()
    try:
        for i in range(FLIP_RECORDS):
            producer.produce(topic, key=b"f%06d" % i, value=b"value-%d" % i,
                             on_delivery=lambda err, msg: err is not None and failures.append(err))  # fmt: skip
            if i % 500 == 499:
                producer.poll(0.1)  # spreads the records over ~6 s of leader moves
        assert producer.flush(120) == 0
    finally:
        moves = flipper.finish()
    producer.poll(1.0)  # a last statistics callback
    assert not failures, failures[:3]
    assert moves >= 6, f"only {moves} leader moves while producing"
    keys = count_keys(kcoord.bootstrap, topic, 3)
    assert len(keys) == FLIP_RECORDS and set(keys) == {b"f%06d" % i for i in range(FLIP_RECORDS)}
    assert broker_names and all(name.startswith("127.0.0.1:") for name in broker_names), broker_names


def test_java_producer_through_kafka_leader_moves_stores_each_record_once(
    kafka_pair: tuple[KafkaCluster, KcoordProcess],
    java_peer: Any,
) -> None:
    cluster, kcoord = kafka_pair
    topic = f"kip951-kafka-java-{uuid.uuid4().hex[:8]}"
    create_replicated_topic(cluster, topic, 3)
    flipper = LeaderFlipper(cluster, topic, 3)
    peer = java_peer("ProducerPeer", ["--bootstrap", kcoord.bootstrap, "--topic", topic, "--count", str(FLIP_RECORDS),
                                      "--key-prefix", "g", "--pause-every", "500", "--pause-ms", "100"])  # fmt: skip
    flipper.start()
    reached: set[str] = set()
    try:
        while peer.process.poll() is None:  # the peer's sockets, sampled while it runs
            with contextlib.suppress(OSError):
                reached |= upstream_hosts_of(peer.process.pid)
            time.sleep(0.2)
        assert peer.wait_exit(180) == 0, peer.stderr_tail()
    finally:
        moves = flipper.finish()
    produced = peer.latest("produced")
    assert produced is not None and produced["acked"] == FLIP_RECORDS and produced["failed"] == 0, produced
    assert moves >= 6, f"only {moves} leader moves while producing"
    assert not reached, f"the Java producer connected to Kafka itself: {reached}"
    keys = count_keys(kcoord.bootstrap, topic, 3)
    assert len(keys) == FLIP_RECORDS and set(keys) == {b"g%06d" % i for i in range(FLIP_RECORDS)}
