"""The relay's guard of kcoord's internal topics (coordinator/net/relay/guard.py), pure: a request's
bytes in, the decision out: relayed as it came, or refused (in part) with Kafka's answer."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kcoord.coordinator.net.relay import guard
from kcoord.coordinator.net.relay.guard import ProtectedTopics, Refusal
from kcoord.protocol import frames, relay_messages, storage_messages
from kcoord.protocol import messages as m
from kcoord.protocol.codec import Message
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.primitives import CodecError
from kcoord.storage.ownership import transactional_id, transactional_id_prefix

OFFSETS, EVENTS, ORDINARY = "__kcoord_offsets", "__kcoord_events", "orders"
OFFSETS_ID, ORDINARY_ID = uuid.uuid4(), uuid.uuid4()
SHARD_TXN = transactional_id(OFFSETS, 17)  # the transactional id shard 17 fences its log with
PROTECTED = ProtectedTopics(
    frozenset({OFFSETS, EVENTS}),
    {OFFSETS: OFFSETS_ID, ORDINARY: ORDINARY_ID},
    transactional_id_prefix=transactional_id_prefix(OFFSETS),
)
TXN_AUTH = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
# Records that happen to hold a protected topic's name: only topic names count, never record bytes.
RECORDS = b"\x00" * 12 + OFFSETS.encode() + b"\x01" * 40

TOPIC_AUTH = ErrorCode.TOPIC_AUTHORIZATION_FAILED
CLUSTER_AUTH = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def payload(request: Message, version: int, correlation_id: int = 7) -> bytes:
    """A request frame without its size prefix, as the relay sees it."""
    return frames.encode_request(request.SCHEMA.api_key, version, correlation_id, "guard-test", request)[4:]


def body(cls: type[Message], frame: bytes, version: int) -> Any:
    return relay_messages.decode_request_body(cls, frame, version)


def roundtrip(refusal: Refusal, response: Message) -> Any:
    """The answer as a client decodes it: encoded at the request's version, decoded again."""
    framed = relay_messages.encode_response(7, response, refusal.version)
    correlation_id, decoded = storage_messages.decode_response(
        refusal.response_cls, refusal.version, framed[4:]
    )
    assert correlation_id == 7
    return decoded


def test_api_keys_are_kafkas() -> None:
    assert m.ProduceRequest.SCHEMA.api_key == guard.PRODUCE
    assert storage_messages.AddPartitionsToTxnRequest.SCHEMA.api_key == guard.ADD_PARTITIONS_TO_TXN
    classes = {
        guard.DELETE_TOPICS: relay_messages.DeleteTopicsRequest,
        guard.DELETE_RECORDS: relay_messages.DeleteRecordsRequest,
        guard.WRITE_TXN_MARKERS: relay_messages.WriteTxnMarkersRequest,
        guard.ALTER_CONFIGS: relay_messages.AlterConfigsRequest,
        guard.CREATE_PARTITIONS: relay_messages.CreatePartitionsRequest,
        guard.INCREMENTAL_ALTER_CONFIGS: relay_messages.IncrementalAlterConfigsRequest,
        guard.ALTER_PARTITION_REASSIGNMENTS: relay_messages.AlterPartitionReassignmentsRequest,
    }
    for key, cls in classes.items():
        assert cls.SCHEMA.api_key == key
        assert guard.GUARDED_VERSIONS[key] == (cls.SCHEMA.valid.low, cls.SCHEMA.valid.high)
    assert storage_messages.InitProducerIdRequest.SCHEMA.api_key == guard.INIT_PRODUCER_ID
    assert storage_messages.EndTxnRequest.SCHEMA.api_key == guard.END_TXN
    assert set(guard.GUARDED_APIS) == {
        *classes,
        guard.PRODUCE,
        guard.ADD_PARTITIONS_TO_TXN,
        guard.INIT_PRODUCER_ID,
        guard.END_TXN,
    }


# -- Produce ---------------------------------------------------------------------------------------
PRODUCE_VERSIONS = range(3, 14)


def produce(version: int, topics: list[str], acks: int = -1, transactional_id: str | None = None) -> bytes:
    R = m.ProduceRequest
    ids = PROTECTED.ids
    return payload(
        R(
            transactional_id=transactional_id,
            acks=acks,
            timeout_ms=30000,
            topic_data=[
                R.TopicProduceData(
                    name=t,
                    topic_id=ids.get(t, uuid.UUID(int=0)),
                    partition_data=[
                        R.PartitionProduceData(index=p, records=RECORDS + bytes([p])) for p in (0, 17)
                    ],
                )
                for t in topics
            ],
        ),
        version,
    )


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_produce_to_ordinary_topics_is_relayed_as_it_came(version: int) -> None:
    topics = [ORDINARY] if version >= 13 else [ORDINARY, "other"]  # v13 names topics by id only
    assert guard.check(guard.PRODUCE, version, produce(version, topics), PROTECTED) is None
    assert guard.check(guard.PRODUCE, version, produce(version, topics, acks=0), PROTECTED) is None


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
@pytest.mark.parametrize("transactional_id", [None, "txn-1"])
def test_produce_to_the_internal_topic_alone_is_refused_per_partition(
    version: int, transactional_id: str | None
) -> None:
    refusal = guard.check(
        guard.PRODUCE, version, produce(version, [OFFSETS], transactional_id=transactional_id), PROTECTED
    )
    assert refusal is not None
    assert refusal.resources == (OFFSETS,) and refusal.api_name == "Produce"
    assert refusal.forward is None and refusal.answered
    answer = roundtrip(refusal, refusal.answer(None))
    [topic] = answer.responses
    assert (topic.topic_id if version >= 13 else topic.name) == (OFFSETS_ID if version >= 13 else OFFSETS)
    assert [(p.index, p.error_code, p.base_offset) for p in topic.partition_responses] == [
        (0, TOPIC_AUTH, -1),
        (17, TOPIC_AUTH, -1),
    ]


@pytest.mark.parametrize("version", range(3, 13))
def test_produce_mixing_topics_relays_the_ordinary_ones_and_merges_the_answers(version: int) -> None:
    frame = produce(version, [ORDINARY, EVENTS, "other"], transactional_id="txn-1")
    refusal = guard.check(guard.PRODUCE, version, frame, PROTECTED)
    assert refusal is not None and refusal.resources == (EVENTS,)
    assert refusal.forward is not None
    # The same header (correlation id, client id), the same producer, only the ordinary topics,
    # their records byte for byte.
    assert refusal.forward[:8] == frame[:8]
    _client_id, forwarded = frames.decode_request_body(refusal.forward, guard.PRODUCE, version)
    original = frames.decode_request_body(frame, guard.PRODUCE, version)[1]
    assert forwarded.transactional_id == "txn-1" and forwarded.acks == -1
    assert [t.name for t in forwarded.topic_data] == [ORDINARY, "other"]
    assert forwarded.topic_data == [t for t in original.topic_data if t.name != EVENTS]
    assert guard.check(guard.PRODUCE, version, refusal.forward, PROTECTED) is None

    R = m.ProduceResponse
    upstream = R(
        responses=[
            R.TopicProduceResponse(
                name=t,
                partition_responses=[
                    R.PartitionProduceResponse(index=p, base_offset=100 + p) for p in (0, 17)
                ],
            )
            for t in (ORDINARY, "other")
        ],
        throttle_time_ms=5,
    )
    answer = roundtrip(refusal, refusal.answer(upstream))
    by_topic = {
        t.name: [(p.index, p.error_code, p.base_offset) for p in t.partition_responses]
        for t in answer.responses
    }
    assert by_topic == {
        ORDINARY: [(0, 0, 100), (17, 0, 117)],
        "other": [(0, 0, 100), (17, 0, 117)],
        EVENTS: [(0, TOPIC_AUTH, -1), (17, TOPIC_AUTH, -1)],
    }
    assert answer.throttle_time_ms == 5


@pytest.mark.parametrize("version", [3, 8, 9, 12])
def test_acks_0_produce_to_the_internal_topic_is_not_answered(version: int) -> None:
    refusal = guard.check(guard.PRODUCE, version, produce(version, [ORDINARY, OFFSETS], acks=0), PROTECTED)
    assert refusal is not None and not refusal.answered
    assert refusal.forward is not None  # the ordinary part still goes (as Kafka appends it), then the close
    forwarded = frames.decode_request_body(refusal.forward, guard.PRODUCE, version)[1]
    assert forwarded.acks == 0 and [t.name for t in forwarded.topic_data] == [ORDINARY]


def test_produce_by_topic_id_is_checked_against_the_protected_ids() -> None:
    refusal = guard.check(guard.PRODUCE, 13, produce(13, [OFFSETS]), PROTECTED)
    assert refusal is not None and refusal.resources == (OFFSETS,)
    # An id the catalog does not know names no protected topic.
    unknown = ProtectedTopics(PROTECTED.names, {})
    assert guard.check(guard.PRODUCE, 13, produce(13, [OFFSETS]), unknown) is None


@pytest.mark.parametrize("version", [3, 8, 9, 12, 13])
def test_a_truncated_produce_is_bad_input_never_a_crash(version: int) -> None:
    frame = produce(version, [ORDINARY, OFFSETS])
    for cut in range(10, len(frame)):
        try:
            guard.check(guard.PRODUCE, version, frame[:cut], PROTECTED)
        except CodecError:
            continue


def test_a_produce_whose_lengths_lie_is_bad_input() -> None:
    frame = bytearray(produce(8, [ORDINARY]))
    # The topics array claims a billion topics.
    start = frame.index(ORDINARY.encode()) - 2 - 4
    frame[start : start + 4] = (10**9).to_bytes(4, "big")
    with pytest.raises(CodecError):
        guard.check(guard.PRODUCE, 8, bytes(frame), PROTECTED)


# -- admin APIs: the protected entries refused, the rest relayed ------------------------------------
@pytest.mark.parametrize("version", range(1, 7))
def test_delete_topics_refuses_the_internal_topics_and_relays_the_rest(version: int) -> None:
    R = relay_messages.DeleteTopicsRequest
    names = [ORDINARY, OFFSETS, EVENTS]
    if version >= 6:
        request = R(topics=[R.DeleteTopicState(name=n) for n in names], timeout_ms=1000)
    else:
        request = R(topic_names=names, timeout_ms=1000)
    refusal = guard.check(guard.DELETE_TOPICS, version, payload(request, version), PROTECTED)
    assert refusal is not None and refusal.resources == (OFFSETS, EVENTS)
    assert refusal.forward is not None
    forwarded = body(R, refusal.forward, version)
    kept = [t.name for t in forwarded.topics] if version >= 6 else forwarded.topic_names
    assert kept == [ORDINARY]
    Resp = relay_messages.DeleteTopicsResponse
    upstream = Resp(responses=[Resp.DeletableTopicResult(name=ORDINARY, error_code=0)])
    answer = roundtrip(refusal, refusal.answer(upstream))
    assert [(r.name, r.error_code) for r in answer.responses] == [
        (ORDINARY, 0),
        (OFFSETS, TOPIC_AUTH),
        (EVENTS, TOPIC_AUTH),
    ]


def test_delete_topics_by_id_is_refused_without_naming_the_topic() -> None:
    R = relay_messages.DeleteTopicsRequest
    request = R(topics=[R.DeleteTopicState(name=None, topic_id=OFFSETS_ID)], timeout_ms=1000)
    refusal = guard.check(guard.DELETE_TOPICS, 6, payload(request, 6), PROTECTED)
    assert refusal is not None and refusal.resources == (OFFSETS,) and refusal.forward is None
    [result] = roundtrip(refusal, refusal.answer(None)).responses
    assert (result.name, result.topic_id, result.error_code) == (None, OFFSETS_ID, TOPIC_AUTH)
    ordinary = R(topics=[R.DeleteTopicState(name=None, topic_id=ORDINARY_ID)], timeout_ms=1000)
    assert guard.check(guard.DELETE_TOPICS, 6, payload(ordinary, 6), PROTECTED) is None


@pytest.mark.parametrize("version", range(0, 3))
def test_delete_records_refuses_per_partition(version: int) -> None:
    R = relay_messages.DeleteRecordsRequest
    request = R(
        topics=[
            R.DeleteRecordsTopic(
                name=t, partitions=[R.DeleteRecordsPartition(partition_index=p, offset=-1) for p in (3, 17)]
            )
            for t in (OFFSETS, ORDINARY)
        ],
        timeout_ms=1000,
    )
    refusal = guard.check(guard.DELETE_RECORDS, version, payload(request, version), PROTECTED)
    assert refusal is not None and refusal.resources == (OFFSETS,)
    assert refusal.forward is not None
    assert [t.name for t in body(R, refusal.forward, version).topics] == [ORDINARY]
    answer = roundtrip(refusal, refusal.answer(relay_messages.DeleteRecordsResponse()))
    [topic] = answer.topics
    assert topic.name == OFFSETS
    assert [(p.partition_index, p.low_watermark, p.error_code) for p in topic.partitions] == [
        (3, -1, TOPIC_AUTH),
        (17, -1, TOPIC_AUTH),
    ]


@pytest.mark.parametrize("version", range(0, 4))
def test_create_partitions_of_the_internal_topic_is_refused(version: int) -> None:
    R = relay_messages.CreatePartitionsRequest
    request = R(topics=[R.CreatePartitionsTopic(name=OFFSETS, count=60, assignments=None)], timeout_ms=1000)
    refusal = guard.check(guard.CREATE_PARTITIONS, version, payload(request, version), PROTECTED)
    assert refusal is not None and refusal.forward is None
    [result] = roundtrip(refusal, refusal.answer(None)).results
    assert (result.name, result.error_code) == (OFFSETS, TOPIC_AUTH)
    assert result.error_message and OFFSETS in result.error_message


@pytest.mark.parametrize(
    ("api_key", "cls", "versions"),
    [
        (guard.ALTER_CONFIGS, relay_messages.AlterConfigsRequest, range(0, 3)),
        (guard.INCREMENTAL_ALTER_CONFIGS, relay_messages.IncrementalAlterConfigsRequest, range(0, 2)),
    ],
)
def test_altering_the_internal_topics_config_is_refused_but_not_a_brokers(
    api_key: int, cls: Any, versions: range
) -> None:
    for version in versions:
        resources = [
            cls.AlterConfigsResource(resource_type=guard.TOPIC_RESOURCE, resource_name=OFFSETS, configs=[]),
            cls.AlterConfigsResource(
                resource_type=4, resource_name=OFFSETS, configs=[]
            ),  # a broker "named" so
            cls.AlterConfigsResource(resource_type=guard.TOPIC_RESOURCE, resource_name=ORDINARY, configs=[]),
        ]
        refusal = guard.check(api_key, version, payload(cls(resources=resources), version), PROTECTED)
        assert refusal is not None and refusal.resources == (OFFSETS,)
        assert refusal.forward is not None
        kept = body(cls, refusal.forward, version).resources
        assert [(r.resource_type, r.resource_name) for r in kept] == [(4, OFFSETS), (2, ORDINARY)]
        [refused] = roundtrip(refusal, refusal.answer(None)).responses
        assert (refused.resource_type, refused.resource_name, refused.error_code) == (2, OFFSETS, TOPIC_AUTH)


# -- refused whole ---------------------------------------------------------------------------------
@pytest.mark.parametrize("version", range(0, 4))
def test_add_partitions_to_txn_naming_the_internal_topic_is_refused_whole(version: int) -> None:
    R = storage_messages.AddPartitionsToTxnRequest
    request = R(
        v3_and_below_transactional_id="txn-1",
        v3_and_below_producer_id=5,
        v3_and_below_producer_epoch=0,
        v3_and_below_topics=[
            R.AddPartitionsToTxnTopic(name=t, partitions=[0, 17]) for t in (OFFSETS, ORDINARY)
        ],
    )
    refusal = guard.check(guard.ADD_PARTITIONS_TO_TXN, version, payload(request, version), PROTECTED)
    assert refusal is not None and refusal.forward is None and refusal.resources == (OFFSETS,)
    answer = roundtrip(refusal, refusal.answer(None))
    codes = {
        (t.name, p.partition_index): p.partition_error_code
        for t in answer.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }
    assert codes == {
        (OFFSETS, 0): TOPIC_AUTH, (OFFSETS, 17): TOPIC_AUTH,
        (ORDINARY, 0): ErrorCode.OPERATION_NOT_ATTEMPTED, (ORDINARY, 17): ErrorCode.OPERATION_NOT_ATTEMPTED,
    }  # fmt: skip
    request.v3_and_below_topics = request.v3_and_below_topics[1:]
    assert guard.check(guard.ADD_PARTITIONS_TO_TXN, version, payload(request, version), PROTECTED) is None


@pytest.mark.parametrize("version", range(0, 2))
def test_alter_partition_reassignments_of_the_internal_topic_is_a_cluster_refusal(version: int) -> None:
    R = relay_messages.AlterPartitionReassignmentsRequest
    request = R(
        topics=[
            R.ReassignableTopic(name=t, partitions=[R.ReassignablePartition(partition_index=0, replicas=[1])])
            for t in (ORDINARY, EVENTS)
        ]
    )
    refusal = guard.check(guard.ALTER_PARTITION_REASSIGNMENTS, version, payload(request, version), PROTECTED)
    assert refusal is not None and refusal.forward is None and refusal.resources == (EVENTS,)
    answer = roundtrip(refusal, refusal.answer(None))
    assert answer.error_code == CLUSTER_AUTH
    assert {(t.name, p.error_code) for t in answer.responses for p in t.partitions} == {
        (ORDINARY, CLUSTER_AUTH),
        (EVENTS, CLUSTER_AUTH),
    }


@pytest.mark.parametrize("version", range(1, 3))
def test_write_txn_markers_into_the_internal_topic_is_a_cluster_refusal(version: int) -> None:
    R = relay_messages.WriteTxnMarkersRequest
    marker = R.WritableTxnMarker(
        producer_id=9, producer_epoch=1, transaction_result=False, coordinator_epoch=0,
        topics=[R.WritableTxnMarkerTopic(name=OFFSETS, partition_indexes=[17])],
    )  # fmt: skip
    refusal = guard.check(guard.WRITE_TXN_MARKERS, version, payload(R(markers=[marker]), version), PROTECTED)
    assert refusal is not None and refusal.forward is None
    [result] = roundtrip(refusal, refusal.answer(None)).markers
    assert result.producer_id == 9
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in result.topics] == [
        (OFFSETS, [(17, CLUSTER_AUTH)])
    ]


def test_requests_that_name_no_protected_topic_are_relayed_as_they_came() -> None:
    cases: list[tuple[int, int, Message]] = [
        (
            guard.DELETE_TOPICS,
            5,
            relay_messages.DeleteTopicsRequest(topic_names=[ORDINARY, "__consumer_offsets"]),
        ),
        (guard.CREATE_PARTITIONS, 3, relay_messages.CreatePartitionsRequest(topics=[])),
        (guard.ALTER_CONFIGS, 2, relay_messages.AlterConfigsRequest(resources=[])),
        (guard.WRITE_TXN_MARKERS, 1, relay_messages.WriteTxnMarkersRequest(markers=[])),
    ]
    for api_key, version, request in cases:
        assert guard.check(api_key, version, payload(request, version), PROTECTED) is None
    # Not guarded at all: reading the internal topic (Fetch, ListOffsets, Metadata) stays allowed.
    assert guard.check(1, 12, b"anything", PROTECTED) is None


@pytest.mark.parametrize("api_key", sorted(set(guard.GUARDED_APIS) - {guard.PRODUCE}))
def test_bad_admin_requests_are_bad_input(api_key: int) -> None:
    with pytest.raises(CodecError):
        guard.check(api_key, 1, b"\x00\x14\x00\x01\x00\x00\x00\x07\x00\x00\xff\xff\xff", PROTECTED)


# -- kcoord's own transactional ids ----------------------------------------------------------------
@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_produce_under_a_shards_transactional_id_is_refused_whole(version: int) -> None:
    topics = [ORDINARY] if version >= 13 else [ORDINARY, "other"]
    refusal = guard.check(
        guard.PRODUCE, version, produce(version, topics, transactional_id=SHARD_TXN), PROTECTED
    )
    assert refusal is not None and refusal.forward is None and refusal.resources == (SHARD_TXN,)
    answer = roundtrip(refusal, refusal.answer(None))
    assert {p.error_code for t in answer.responses for p in t.partition_responses} == {TXN_AUTH}
    assert sum(len(t.partition_responses) for t in answer.responses) == 2 * len(topics)
    # Another application's transactional id that merely looks alike is its own business.
    for other in ("kcoord:orders:17", f"x{SHARD_TXN}", "kcoord:"):
        assert (
            guard.check(guard.PRODUCE, version, produce(version, topics, transactional_id=other), PROTECTED)
            is None
        )


@pytest.mark.parametrize("version", range(0, 6))
def test_init_producer_id_under_a_shards_transactional_id_is_refused(version: int) -> None:
    R = storage_messages.InitProducerIdRequest
    request = R(transactional_id=SHARD_TXN, transaction_timeout_ms=60000)
    refusal = guard.check(guard.INIT_PRODUCER_ID, version, payload(request, version), PROTECTED)
    assert refusal is not None and refusal.forward is None and refusal.resources == (SHARD_TXN,)
    answer = roundtrip(refusal, refusal.answer(None))
    assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (TXN_AUTH, -1, -1)
    for other in ("my-app-txn", None):  # None: an idempotent producer
        request.transactional_id = other
        assert guard.check(guard.INIT_PRODUCER_ID, version, payload(request, version), PROTECTED) is None


@pytest.mark.parametrize("version", range(0, 5))
def test_end_txn_under_a_shards_transactional_id_is_refused(version: int) -> None:
    R = storage_messages.EndTxnRequest
    request = R(transactional_id=SHARD_TXN, producer_id=3, producer_epoch=1, committed=True)
    refusal = guard.check(guard.END_TXN, version, payload(request, version), PROTECTED)
    assert refusal is not None and refusal.forward is None
    assert roundtrip(refusal, refusal.answer(None)).error_code == TXN_AUTH
    request.transactional_id = "my-app-txn"
    assert guard.check(guard.END_TXN, version, payload(request, version), PROTECTED) is None


@pytest.mark.parametrize("version", range(0, 4))
def test_add_partitions_to_txn_under_a_shards_transactional_id_is_refused(version: int) -> None:
    R = storage_messages.AddPartitionsToTxnRequest
    request = R(
        v3_and_below_transactional_id=SHARD_TXN, v3_and_below_producer_id=5, v3_and_below_producer_epoch=0,
        v3_and_below_topics=[R.AddPartitionsToTxnTopic(name=ORDINARY, partitions=[0, 1])],
    )  # fmt: skip
    refusal = guard.check(guard.ADD_PARTITIONS_TO_TXN, version, payload(request, version), PROTECTED)
    assert refusal is not None and refusal.forward is None and refusal.resources == (SHARD_TXN,)
    answer = roundtrip(refusal, refusal.answer(None))
    assert [
        p.partition_error_code for t in answer.results_by_topic_v3_and_below for p in t.results_by_partition
    ] == [
        TXN_AUTH,
        TXN_AUTH,
    ]


# -- the C extension's produce_scan and its pure-Python twin agree -----------------------------------
def _scan_outcome(scan: Any, frame: bytes, version: int, keys: frozenset[bytes], prefix: bytes) -> Any:
    try:
        return scan(frame, version, keys, prefix)
    except CodecError as exc:  # the same error, up to the detail Python's own exception adds
        return CodecError, str(exc).split(":")[0]


def _scan_cases() -> list[tuple[int, bytes]]:
    cases = []
    for version in PRODUCE_VERSIONS:
        topic_sets = [[ORDINARY], [OFFSETS], [ORDINARY, OFFSETS], [ORDINARY, "other", EVENTS], []]
        if version >= 13:
            topic_sets = [[ORDINARY], [OFFSETS], [ORDINARY, OFFSETS], []]
        for topics in topic_sets:
            for txn in (None, "", "app-txn", SHARD_TXN):
                for acks in (0, 1, -1):
                    cases.append((version, produce(version, topics, acks, txn)))
    return cases


@pytest.mark.skipif(
    guard.c_produce_scan is None, reason="the C extension is not built (KCOORD_PURE_PYTHON or no compiler)"
)
def test_the_c_produce_scan_agrees_with_the_python_one_on_every_frame_cut_and_byte_flip() -> None:
    c_scan = guard.c_produce_scan
    assert c_scan is not None and guard.produce_scan is c_scan
    refused = 0
    for version, frame in _scan_cases():
        for keys, prefix in (
            (guard.produce_keys(PROTECTED, version), PROTECTED.prefix_utf8),
            (frozenset(), b""),
        ):
            whole = _scan_outcome(guard.produce_scan_py, frame, version, keys, prefix)
            assert whole[0] is not CodecError, (version, frame)
            refused += whole[2]
            assert _scan_outcome(c_scan, frame, version, keys, prefix) == whole, (version, frame)
            # Truncated anywhere, and each byte of its header and first topic set to 0x00, 0x7f, 0x80
            # and 0xff (lengths that lie, nulls, varints that run on): the same answer or both CodecError.
            for cut in range(len(frame)):
                assert _scan_outcome(c_scan, frame[:cut], version, keys, prefix) == _scan_outcome(
                    guard.produce_scan_py, frame[:cut], version, keys, prefix
                ), (version, frame, cut)
            for i in range(min(len(frame), 90)):
                for byte in (0x00, 0x01, 0x7F, 0x80, 0xFF):
                    bent = frame[:i] + bytes([byte]) + frame[i + 1 :]
                    assert _scan_outcome(c_scan, bent, version, keys, prefix) == _scan_outcome(
                        guard.produce_scan_py, bent, version, keys, prefix
                    ), (version, frame, i, byte)
    assert refused > 100  # the protected topics and the shard's transactional id were found


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_produce_scan_reads_acks_and_finds_protected_topics(version: int) -> None:
    keys, prefix = guard.produce_keys(PROTECTED, version), PROTECTED.prefix_utf8
    frame = produce(version, [ORDINARY], acks=0, transactional_id="app")
    acks, at, found = guard.produce_scan(frame, version, keys, prefix)
    assert (acks, frame[at : at + 2], found) == (0, b"\x00\x00", False)
    assert guard.produce_scan(produce(version, [ORDINARY, OFFSETS]), version, keys, prefix)[2]
    assert guard.produce_scan(
        produce(version, [ORDINARY], transactional_id=SHARD_TXN), version, keys, prefix
    )[2]
