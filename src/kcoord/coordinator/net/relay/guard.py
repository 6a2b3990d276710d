"""kcoord's internal topics are kcoord's alone: relayed requests that would write, delete or alter
them are refused here, whatever the upstream's ACLs would allow kcoord's own connection.

kcoord relays with its own credentials, so without this a client could do through kcoord anything
the upstream lets kcoord do: delete the offsets topic, produce a fence or a forged offset commit
into it, change its retention. :func:`check` looks at one relayed request (bytes in) and says what
becomes of it (a :class:`Refusal`, or None: relay it as it came):

- Produce, DeleteTopics, DeleteRecords, CreatePartitions, AlterConfigs and IncrementalAlterConfigs
  (topic resources): the parts naming a protected topic are answered TOPIC_AUTHORIZATION_FAILED,
  per partition / topic / resource as Kafka answers a principal that may not touch that topic,
  and the rest of the request is relayed; the upstream's answer and the refused parts are merged.
  A Produce with acks=0 has no answer to carry the error: Kafka closes the connection then, and
  so does kcoord (after relaying the rest).
- AddPartitionsToTxn naming a protected topic is refused whole, as Kafka refuses it: the protected
  partitions TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED.
- AlterPartitionReassignments and WriteTxnMarkers naming a protected topic are refused whole with
  CLUSTER_AUTHORIZATION_FAILED: Kafka authorizes them on the cluster, not per topic.
- Produce, InitProducerId, AddPartitionsToTxn and EndTxn under one of the shards' own transactional
  ids (``kcoord:<internal topic>:<shard>``) are refused whole with
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED: an InitProducerId under one bumps its epoch, which fences
  that shard until kcoord restarts. (AddOffsetsToTxn and TxnOffsetCommit, which kcoord answers
  itself, are refused the same way in dispatch.py.)

Reading (Fetch, ListOffsets, Metadata, DescribeConfigs) and ElectLeaders stay relayed.

Cost: a Produce is the relay's hot path, so its topic names are found by walking the request's
arrays, skipping each partition's records by their length, without decoding them
(:func:`produce_names_protected`, about a microsecond a request); only a Produce that does name a
protected topic is decoded. The other guarded APIs are rare admin requests and are decoded whole.
A request the walk or the decoder cannot read raises CodecError: bad input, on which the
connection closes with a log line (connection.py), as Kafka closes on a request it cannot parse.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kcoord.protocol import frames, relay_messages, storage_messages
from kcoord.protocol import messages as m
from kcoord.protocol.codec import Message, c_produce_scan
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.primitives import CodecError, decode_uvarint
from kcoord.protocol.relay_messages import body_start

from .requests import produce_acks

# Kafka's API keys (the specs' apiKey; tests/unit/test_relay_guard.py checks them against the classes).
PRODUCE = 0
DELETE_TOPICS = 20
DELETE_RECORDS = 21
INIT_PRODUCER_ID = 22
ADD_PARTITIONS_TO_TXN = 24
END_TXN = 26
WRITE_TXN_MARKERS = 27
ALTER_CONFIGS = 33
CREATE_PARTITIONS = 37
INCREMENTAL_ALTER_CONFIGS = 44
ALTER_PARTITION_REASSIGNMENTS = 45

PRODUCE_FLEXIBLE_SINCE = 9
PRODUCE_BY_TOPIC_ID_SINCE = 13  # TopicProduceData.TopicId replaces Name (KIP-516)
DELETE_TOPICS_BY_ID_SINCE = 6
ADD_PARTITIONS_BATCHED_SINCE = 4  # AddPartitionsToTxn v4+: a transactions array (broker to broker)
TOPIC_RESOURCE = 2  # ConfigResource.Type.TOPIC

# The guarded APIs, by name (log lines, the kcoord_relay_refused_total metric's api label).
GUARDED_APIS: dict[int, str] = {
    PRODUCE: "Produce",
    DELETE_TOPICS: "DeleteTopics",
    DELETE_RECORDS: "DeleteRecords",
    INIT_PRODUCER_ID: "InitProducerId",
    ADD_PARTITIONS_TO_TXN: "AddPartitionsToTxn",
    END_TXN: "EndTxn",
    WRITE_TXN_MARKERS: "WriteTxnMarkers",
    ALTER_CONFIGS: "AlterConfigs",
    CREATE_PARTITIONS: "CreatePartitions",
    INCREMENTAL_ALTER_CONFIGS: "IncrementalAlterConfigs",
    ALTER_PARTITION_REASSIGNMENTS: "AlterPartitionReassignments",
}


def _spec_range(cls: type[Message]) -> tuple[int, int]:
    valid = cls.SCHEMA.valid
    assert valid.high is not None
    return valid.low, valid.high


# A guarded request is decoded to be checked, so kcoord offers the guarded admin APIs only in the
# versions its specs know (Produce's are bounded by the relay's address rewriting already): a
# version kcoord cannot read could name a protected topic it would not see.
GUARDED_VERSIONS: dict[int, tuple[int, int]] = {
    api: _spec_range(cls)
    for api, cls in (
        (DELETE_TOPICS, relay_messages.DeleteTopicsRequest),
        (DELETE_RECORDS, relay_messages.DeleteRecordsRequest),
        (WRITE_TXN_MARKERS, relay_messages.WriteTxnMarkersRequest),
        (ALTER_CONFIGS, relay_messages.AlterConfigsRequest),
        (CREATE_PARTITIONS, relay_messages.CreatePartitionsRequest),
        (INCREMENTAL_ALTER_CONFIGS, relay_messages.IncrementalAlterConfigsRequest),
        (ALTER_PARTITION_REASSIGNMENTS, relay_messages.AlterPartitionReassignmentsRequest),
    )
}

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


@dataclass(frozen=True)
class ProtectedTopics:
    """The topics no client may write, delete or alter through kcoord.

    ``ids`` is a live view of topic ids by name (the gateway's topic catalog), for the requests that
    name topics by id (Produce v13, DeleteTopics v6): a protected topic's id is whatever the
    cluster says it is now."""

    names: frozenset[str]
    ids: Mapping[str, uuid.UUID] = field(default_factory=dict)
    # What the shards' transactional ids start with (storage/ownership.py): a client producing,
    # or calling InitProducerId, under one would fence that shard until kcoord restarts.
    transactional_id_prefix: str = ""
    names_utf8: frozenset[bytes] = field(init=False)
    prefix_utf8: bytes = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "names_utf8", frozenset(n.encode() for n in self.names))
        object.__setattr__(self, "prefix_utf8", self.transactional_id_prefix.encode())

    def owns_transactional_id(self, transactional_id: str | None) -> bool:
        prefix = self.transactional_id_prefix
        return bool(prefix) and transactional_id is not None and transactional_id.startswith(prefix)

    def protected_name(self, name: str | None) -> str | None:
        """``name`` if it is a protected topic's, else None (what the refusals below key on)."""
        return name if name in self.names else None

    def name_of_id(self, topic_id: uuid.UUID) -> str | None:
        """The protected topic with id ``topic_id``, or None."""
        for name in self.names:
            if self.ids.get(name) == topic_id:
                return name
        return None

    def id_bytes(self) -> frozenset[bytes]:
        return frozenset(i.bytes for n in self.names if (i := self.ids.get(n)) is not None)


@dataclass(frozen=True)
class Refusal:
    """What becomes of a relayed request that names a protected topic.

    ``forward``: the request without the refused parts, to relay (None: nothing is left to relay).
    ``answer(upstream)``: the client's answer, built from the upstream's answer to ``forward``
    (None when nothing was relayed) and the refused parts. ``answered``: False for an acks=0
    Produce, which gets no answer: the connection closes instead."""

    api_key: int
    version: int
    resources: tuple[str, ...]  # the protected topics the request named
    forward: bytes | None
    answer: Callable[[Message | None], Message]
    response_cls: type[Message]
    answered: bool = True

    @property
    def api_name(self) -> str:
        return GUARDED_APIS[self.api_key]


def check(api_key: int, version: int, payload: bytes, protected: ProtectedTopics) -> Refusal | None:
    """What becomes of relayed request ``payload`` (a frame without size prefix): None to relay it
    as it came, or a :class:`Refusal`. Raises CodecError on a request it cannot read."""
    if api_key == PRODUCE:
        if produce_scan(payload, version, produce_keys(protected, version), protected.prefix_utf8)[2]:
            return produce_refusal(payload, version, protected)
        return None
    checker = _CHECKERS.get(api_key)
    if checker is None:
        return None
    return checker(payload, version, protected)


def produce_topics_start(payload: bytes, version: int) -> tuple[int, int, int]:
    """(acks, where the topics array starts, where the body starts: its transactional id) of a
    Produce request: what the relay reads of every Produce anyway (acks decide how the answer is
    paired)."""
    body = body_start(payload, version >= PRODUCE_FLEXIBLE_SINCE)
    acks, pos = produce_acks(payload, body, version)
    return acks, pos + 6, body  # acks int16, timeout_ms int32


def produce_scan_py(
    payload: bytes, version: int, keys: frozenset[bytes], prefix: bytes
) -> tuple[int, int, bool]:
    """``(acks, where acks are, whether it names a protected topic or transactional id)`` of a
    Produce request: what the relay and the guard read of every Produce. ``keys``: the protected
    topics' names in UTF-8 (their ids' bytes from v13: :func:`produce_keys`); ``prefix``: the
    shards' transactional id prefix in UTF-8. The C extension's ``produce_scan`` is the same in one
    call (protocol/_cdecode.c; tests/unit/test_relay_guard.py runs both on the same frames)."""
    acks, topics_at, body_at = produce_topics_start(payload, version)
    protected = produce_names_protected(payload, version, keys, topics_at) or produce_transaction_protected(
        payload, version, prefix, body_at
    )
    return acks, topics_at - 6, protected


produce_scan: Callable[[bytes, int, frozenset[bytes], bytes], tuple[int, int, bool]] = (
    c_produce_scan or produce_scan_py
)


def produce_keys(protected: ProtectedTopics, version: int) -> frozenset[bytes]:
    """What :func:`produce_scan` compares a Produce's topics with: names, or ids from v13."""
    return protected.id_bytes() if version >= PRODUCE_BY_TOPIC_ID_SINCE else protected.names_utf8


def produce_transaction_protected(payload: bytes, version: int, prefix: bytes, body_at: int) -> bool:
    """Whether a Produce is sent under one of kcoord's own transactional ids (``prefix``: theirs in
    UTF-8), read in place (:func:`produce_topics_start` read past it, so it is within the frame)."""
    if not prefix:
        return False
    pos = body_at
    if version >= PRODUCE_FLEXIBLE_SINCE:
        size, pos = decode_uvarint(payload, pos)
        size -= 1
    else:
        (size,) = _INT16.unpack_from(payload, pos)
        pos += 2
    return size >= len(prefix) and payload.startswith(prefix, pos)


def produce_names_protected(payload: bytes, version: int, keys: frozenset[bytes], pos: int) -> bool:
    """Whether a Produce request names a protected topic (``keys``: :func:`produce_keys`): its topic
    names (or ids, v13+) read by walking its arrays from ``pos``, where the topics array starts
    (:func:`produce_topics_start`), each partition's records skipped by their length, never decoded.
    Only the partitions of topics before the last are walked (to reach the next name): the common
    request names one topic, and its check reads that name and nothing after it."""
    try:
        if version >= PRODUCE_FLEXIBLE_SINCE:
            by_id = version >= PRODUCE_BY_TOPIC_ID_SINCE
            count = payload[pos]
            pos += 1
            if count >= 0x80:
                count, pos = decode_uvarint(payload, pos - 1)
            for remaining in range(count - 2, -1, -1):  # the compact array's length is count - 1
                if by_id:
                    key = payload[pos : pos + 16]
                    pos += 16
                else:
                    size = payload[pos]
                    pos += 1
                    if size >= 0x80:
                        size, pos = decode_uvarint(payload, pos - 1)
                    key = payload[pos : pos + size - 1]
                    pos += size - 1
                if key in keys:
                    return True
                if not remaining:
                    return False
                partitions, pos = decode_uvarint(payload, pos)
                for _ in range(partitions - 1):
                    pos += 4  # index int32, then the records: a compact length (inlined: this loop
                    size = 0  # runs per partition) and the bytes
                    for shift in (0, 7, 14, 21, 28):
                        byte = payload[pos]
                        pos += 1
                        size |= (byte & 0x7F) << shift
                        if byte < 0x80:
                            break
                    else:
                        raise CodecError(f"Produce v{version}: a records length longer than 5 bytes")
                    if size > 1:
                        pos += size - 1
                    pos = pos + 1 if payload[pos] == 0 else frames.skip_tagged_fields(payload, pos)
                pos = pos + 1 if payload[pos] == 0 else frames.skip_tagged_fields(payload, pos)
        else:
            names = keys
            (count,) = _INT32.unpack_from(payload, pos)
            pos += 4
            for remaining in range(count - 1, -1, -1):
                (size,) = _INT16.unpack_from(payload, pos)
                pos += 2
                if payload[pos : pos + size] in names:
                    return True
                if not remaining:
                    return False
                pos += max(size, 0)
                (partitions,) = _INT32.unpack_from(payload, pos)
                pos += 4
                for _ in range(partitions):
                    (size,) = _INT32.unpack_from(payload, pos + 4)  # index int32, then the records
                    pos += 8 + max(size, 0)
    except (struct.error, IndexError) as exc:
        raise CodecError(f"Produce v{version} ends inside its topics: {exc}") from None
    return False


# -- Produce ---------------------------------------------------------------------------------------
def produce_refusal(payload: bytes, version: int, protected: ProtectedTopics) -> Refusal:
    """The refusal of a Produce that :func:`produce_names_protected` found naming a protected topic."""
    _client_id, request = frames.decode_request_body(payload, PRODUCE, version)
    assert isinstance(request, m.ProduceRequest)
    by_id = version >= PRODUCE_BY_TOPIC_ID_SINCE
    kept, refused, names = [], [], []
    error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if protected.owns_transactional_id(request.transactional_id):
        # Kafka refuses a Produce under a transactional id the client may not use whole.
        refused, names = list(request.topic_data), [str(request.transactional_id)]
        error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        for topic in request.topic_data:
            name = protected.name_of_id(topic.topic_id) if by_id else topic.name
            if name is not None and name in protected.names:
                refused.append(topic)
                names.append(name)
            else:
                kept.append(topic)
    R = m.ProduceResponse
    refusals = [
        R.TopicProduceResponse(
            name=topic.name,
            topic_id=topic.topic_id,
            partition_responses=[
                R.PartitionProduceResponse(
                    index=p.index,
                    error_code=error,
                    base_offset=-1,
                    log_append_time_ms=-1,
                    log_start_offset=-1,
                )
                for p in topic.partition_data
            ],
        )
        for topic in refused
    ]
    forward = None
    if kept:
        request.topic_data = kept
        forward = relay_messages.encode_request_body(payload, request, version)

    def answer(upstream: Message | None) -> Message:
        response = upstream if isinstance(upstream, R) else R(throttle_time_ms=0)
        response.responses = [*(response.responses or ()), *refusals]
        return response

    return Refusal(PRODUCE, version, tuple(names), forward, answer, R, answered=request.acks != 0)


# -- the admin APIs: refuse the protected entries, relay the rest -----------------------------------
def _split(
    api_key: int,
    version: int,
    payload: bytes,
    request: Any,
    request_field: str,
    protected_name: Callable[[Any], str | None],
    response_cls: type[Message],
    response_field: str,
    refused_entry: Callable[[Any, str], Any],
) -> Refusal | None:
    """The common shape: ``request_field`` lists entries, each naming one topic; the entries naming a
    protected one are answered ``refused_entry(entry, name)`` in the response's ``response_field``."""
    entries = getattr(request, request_field) or []
    kept, refusals, names = [], [], []
    for entry in entries:
        name = protected_name(entry)
        if name is None:
            kept.append(entry)
        else:
            refusals.append(refused_entry(entry, name))
            names.append(name)
    if not refusals:
        return None
    forward = None
    if kept:
        setattr(request, request_field, kept)
        forward = relay_messages.encode_request_body(payload, request, version)

    def answer(upstream: Message | None) -> Message:
        response = upstream if isinstance(upstream, response_cls) else response_cls()
        setattr(response, response_field, [*(getattr(response, response_field) or ()), *refusals])
        return response

    return Refusal(api_key, version, tuple(names), forward, answer, response_cls)


def _by_topic_name(protected: ProtectedTopics) -> Callable[[Any], str | None]:
    """The protected topic an entry with a ``name`` field names, or None."""
    return lambda topic: protected.protected_name(topic.name)


def _refused_message(name: str) -> str:
    return f"Topic {name} is kcoord's internal topic: clients may not write, delete or alter it"


def _delete_topics(payload: bytes, version: int, protected: ProtectedTopics) -> Refusal | None:
    request = relay_messages.decode_request_body(relay_messages.DeleteTopicsRequest, payload, version)
    R = relay_messages.DeleteTopicsResponse
    if version < DELETE_TOPICS_BY_ID_SINCE:
        return _split(
            DELETE_TOPICS, version, payload, request, "topic_names",
            protected.protected_name,
            R, "responses",
            lambda name, _: R.DeletableTopicResult(
                name=name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=_refused_message(name)
            ),
        )  # fmt: skip

    def named(state: Any) -> str | None:
        if state.name is not None:
            return protected.protected_name(state.name)
        return protected.name_of_id(state.topic_id)

    return _split(
        DELETE_TOPICS, version, payload, request, "topics", named, R, "responses",
        lambda state, name: R.DeletableTopicResult(
            name=state.name,  # asked by id: Kafka does not name a topic the client may not see
            topic_id=state.topic_id,
            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            error_message=_refused_message(name),
        ),
    )  # fmt: skip


def _delete_records(payload: bytes, version: int, protected: ProtectedTopics) -> Refusal | None:
    request = relay_messages.decode_request_body(relay_messages.DeleteRecordsRequest, payload, version)
    R = relay_messages.DeleteRecordsResponse
    return _split(
        DELETE_RECORDS, version, payload, request, "topics",
        _by_topic_name(protected),
        R, "topics",
        lambda topic, _: R.DeleteRecordsTopicResult(
            name=topic.name,
            partitions=[
                R.DeleteRecordsPartitionResult(
                    partition_index=p.partition_index, low_watermark=-1,
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                )
                for p in topic.partitions
            ],
        ),
    )  # fmt: skip


def _create_partitions(payload: bytes, version: int, protected: ProtectedTopics) -> Refusal | None:
    request = relay_messages.decode_request_body(relay_messages.CreatePartitionsRequest, payload, version)
    R = relay_messages.CreatePartitionsResponse
    return _split(
        CREATE_PARTITIONS, version, payload, request, "topics",
        _by_topic_name(protected),
        R, "results",
        lambda topic, name: R.CreatePartitionsTopicResult(
            name=name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=_refused_message(name)
        ),
    )  # fmt: skip


def _config_checker(
    api_key: int, request_cls: type[Message], response_cls: Any
) -> Callable[[bytes, int, ProtectedTopics], Refusal | None]:
    """AlterConfigs and IncrementalAlterConfigs: the same shape; only topic resources are guarded
    (a broker's config is the upstream operator's business)."""

    def checker(payload: bytes, version: int, protected: ProtectedTopics) -> Refusal | None:
        request = relay_messages.decode_request_body(request_cls, payload, version)
        return _split(
            api_key, version, payload, request, "resources",
            lambda r: r.resource_name
            if r.resource_type == TOPIC_RESOURCE and r.resource_name in protected.names
            else None,
            response_cls, "responses",
            lambda r, name: response_cls.AlterConfigsResourceResponse(
                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                error_message=_refused_message(name),
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            ),
        )  # fmt: skip

    return checker


# -- refused whole ---------------------------------------------------------------------------------
def _whole(api_key: int, version: int, names: Iterable[str], response: Message) -> Refusal | None:
    named = tuple(dict.fromkeys(names))
    if not named:
        return None
    return Refusal(api_key, version, named, None, lambda _upstream: response, type(response))


def _add_partitions_to_txn(payload: bytes, version: int, protected: ProtectedTopics) -> Refusal | None:
    """Kafka refuses the whole request when any topic is not authorized: those partitions
    TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED (none joins the transaction); and
    every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED under a transactional id the client may not
    use (here: a shard's own)."""
    request = relay_messages.decode_request_body(storage_messages.AddPartitionsToTxnRequest, payload, version)
    R = storage_messages.AddPartitionsToTxnResponse
    names: list[str] = []

    def results(transactional_id: str | None, topics: Iterable[Any]) -> list[Any]:
        kcoords_id = protected.owns_transactional_id(transactional_id)
        if kcoords_id:
            names.append(str(transactional_id))
        out = []
        for topic in topics:
            if kcoords_id:
                code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            elif topic.name in protected.names:
                names.append(topic.name)
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            else:
                code = ErrorCode.OPERATION_NOT_ATTEMPTED
            out.append(
                R.AddPartitionsToTxnTopicResult(
                    name=topic.name,
                    results_by_partition=[
                        R.AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=code)
                        for p in topic.partitions
                    ],
                )
            )
        return out

    if version < ADD_PARTITIONS_BATCHED_SINCE:
        topics = results(request.v3_and_below_transactional_id, request.v3_and_below_topics or ())
        response = R(throttle_time_ms=0, results_by_topic_v3_and_below=topics)
    else:
        response = R(
            throttle_time_ms=0,
            results_by_transaction=[
                R.AddPartitionsToTxnResult(
                    transactional_id=t.transactional_id, topic_results=results(t.transactional_id, t.topics)
                )
                for t in request.transactions or ()
            ],
        )
    if not names:
        return None
    return _whole(ADD_PARTITIONS_TO_TXN, version, names, response)


def _alter_partition_reassignments(
    payload: bytes, version: int, protected: ProtectedTopics
) -> Refusal | None:
    request = relay_messages.decode_request_body(
        relay_messages.AlterPartitionReassignmentsRequest, payload, version
    )
    names = [t.name for t in request.topics or () if t.name in protected.names]
    if not names:
        return None
    R = relay_messages.AlterPartitionReassignmentsResponse
    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    message = _refused_message(names[0])
    response = R(
        throttle_time_ms=0,
        error_code=code,
        error_message=message,
        responses=[
            R.ReassignableTopicResponse(
                name=t.name,
                partitions=[
                    R.ReassignablePartitionResponse(partition_index=p.partition_index, error_code=code, error_message=message)
                    for p in t.partitions
                ],
            )
            for t in request.topics
        ],
    )  # fmt: skip
    return _whole(ALTER_PARTITION_REASSIGNMENTS, version, names, response)


def _write_txn_markers(payload: bytes, version: int, protected: ProtectedTopics) -> Refusal | None:
    request = relay_messages.decode_request_body(relay_messages.WriteTxnMarkersRequest, payload, version)
    names = [t.name for mk in request.markers or () for t in mk.topics if t.name in protected.names]
    if not names:
        return None
    R = relay_messages.WriteTxnMarkersResponse
    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    response = R(
        markers=[
            R.WritableTxnMarkerResult(
                producer_id=mk.producer_id,
                topics=[
                    R.WritableTxnMarkerTopicResult(
                        name=t.name,
                        partitions=[
                            R.WritableTxnMarkerPartitionResult(partition_index=p, error_code=code)
                            for p in t.partition_indexes
                        ],
                    )
                    for t in mk.topics
                ],
            )
            for mk in request.markers
        ]
    )
    return _whole(WRITE_TXN_MARKERS, version, names, response)


def _init_producer_id(payload: bytes, version: int, protected: ProtectedTopics) -> Refusal | None:
    """InitProducerId under a shard's transactional id would bump its epoch: the shard is fenced."""
    request = relay_messages.decode_request_body(storage_messages.InitProducerIdRequest, payload, version)
    if not protected.owns_transactional_id(request.transactional_id):
        return None
    response = storage_messages.InitProducerIdResponse(
        error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, producer_id=-1, producer_epoch=-1
    )
    return _whole(INIT_PRODUCER_ID, version, [str(request.transactional_id)], response)


def _end_txn(payload: bytes, version: int, protected: ProtectedTopics) -> Refusal | None:
    request = relay_messages.decode_request_body(storage_messages.EndTxnRequest, payload, version)
    if not protected.owns_transactional_id(request.transactional_id):
        return None
    response = storage_messages.EndTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    return _whole(END_TXN, version, [request.transactional_id], response)


_CHECKERS: dict[int, Callable[[bytes, int, ProtectedTopics], Refusal | None]] = {
    INIT_PRODUCER_ID: _init_producer_id,
    END_TXN: _end_txn,
    DELETE_TOPICS: _delete_topics,
    DELETE_RECORDS: _delete_records,
    CREATE_PARTITIONS: _create_partitions,
    ALTER_CONFIGS: _config_checker(
        ALTER_CONFIGS, relay_messages.AlterConfigsRequest, relay_messages.AlterConfigsResponse
    ),
    INCREMENTAL_ALTER_CONFIGS: _config_checker(
        INCREMENTAL_ALTER_CONFIGS,
        relay_messages.IncrementalAlterConfigsRequest,
        relay_messages.IncrementalAlterConfigsResponse,
    ),
    ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
    ALTER_PARTITION_REASSIGNMENTS: _alter_partition_reassignments,
    WRITE_TXN_MARKERS: _write_txn_markers,
}
