"""Golden vectors for the KIP-848 consumer-group records (types 3-8 and 16) kcoord stores.

The expected bytes are written out by hand from Kafka's specs (/work/shared/kafka-specs/
coordinator-records/ConsumerGroup*.json, Kafka trunk 2026-08, also in protocol/schemas): key = int16
record type + key struct (v0, not flexible: int16-length strings); value = int16 version 0 + value
struct (v0 is flexible: unsigned-varint lengths + 1, a tagged-field section after every struct).
They are deliberately not produced with our codec, so a schema or codegen mistake cannot hide
behind itself. Tagged fields follow Kafka's generator: one equal to its default is not written,
and a nullable one whose spec default is JSON null is written when null (its default is the empty
value, not null), as Kafka writes ClassicMemberMetadata for a member of the consumer protocol.
"""

from __future__ import annotations

import struct
import uuid

import pytest

from kcoord.coordinator.core import records as builders
from kcoord.coordinator.core.consumer.group import ResolvedRegularExpression
from kcoord.coordinator.core.consumer.member import (
    ClassicMemberMetadata,
    ConsumerGroupMember,
    MemberState,
    partition_epochs_from_record,
)
from kcoord.protocol import records
from kcoord.protocol.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
    Record,
    decode_record,
    encode_record,
)
from tests.unit.test_records_golden import i16, i32, i64, string

FOO = uuid.UUID("01020304-0506-0708-090a-0b0c0d0e0f10")
BAR = uuid.UUID("a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf")

# -- hand encoders (the classic ones, i16/i32/i64/string, are test_records_golden's) -----------------------


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def cstring(s: str | None) -> bytes:
    """COMPACT_(NULLABLE_)STRING: uvarint(length + 1), 0 for null."""
    if s is None:
        return b"\x00"
    raw = s.encode()
    return uvarint(len(raw) + 1) + raw


def cbytes(b: bytes) -> bytes:
    return uvarint(len(b) + 1) + b


def carray(items: list[bytes]) -> bytes:
    """COMPACT_ARRAY: uvarint(count + 1), then the elements."""
    return uvarint(len(items) + 1) + b"".join(items)


def tags(*fields: tuple[int, bytes]) -> bytes:
    """A tagged-field section: count, then (tag, size, bytes) in tag order."""
    return uvarint(len(fields)) + b"".join(uvarint(t) + uvarint(len(b)) + b for t, b in sorted(fields))


NO_TAGS = tags()


def roundtrip(record: Record, key_bytes: bytes, value_bytes: bytes | None) -> Record:
    """The record encodes to exactly these bytes, and they decode back to an equal record."""
    assert encode_record(record) == (key_bytes, value_bytes)
    decoded = decode_record(key_bytes, value_bytes)
    assert decoded is not None
    assert decoded.key == record.key
    return decoded


# -- keys ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (ConsumerGroupMetadataKey(group_id="grp"), i16(3) + string("grp")),
        (ConsumerGroupPartitionMetadataKey(group_id="grp"), i16(4) + string("grp")),
        (
            ConsumerGroupMemberMetadataKey(group_id="grp", member_id="m-1"),
            i16(5) + string("grp") + string("m-1"),
        ),
        (ConsumerGroupTargetAssignmentMetadataKey(group_id="grp"), i16(6) + string("grp")),
        (
            ConsumerGroupTargetAssignmentMemberKey(group_id="grp", member_id="m-1"),
            i16(7) + string("grp") + string("m-1"),
        ),
        (
            ConsumerGroupCurrentMemberAssignmentKey(group_id="grp", member_id="m-1"),
            i16(8) + string("grp") + string("m-1"),
        ),
        (
            ConsumerGroupRegularExpressionKey(group_id="grp", regular_expression="or.*"),
            i16(16) + string("grp") + string("or.*"),
        ),
    ],
)
def test_consumer_group_keys_golden(key: object, expected: bytes) -> None:
    """Every key: the record type, then the key struct v0 with int16-length strings."""
    assert records.encode_key(key) == expected
    decoded = decode_record(expected, None)
    assert decoded == Record(key, None)
    assert decoded is not None and decoded.is_tombstone


# -- type 3: ConsumerGroupMetadata ---------------------------------------------------------------------------


def test_group_epoch_record_golden_without_metadata_hash() -> None:
    """newConsumerGroupEpochRecord: value v0, epoch; a zero MetadataHash (its default) is not written."""
    record = builders.consumer_group_epoch_record("grp", 7)
    roundtrip(record, i16(3) + string("grp"), i16(0) + i32(7) + NO_TAGS)


def test_group_epoch_record_golden_with_metadata_hash() -> None:
    """KIP-1101 (Kafka 4.1+): the metadata hash is tag 0, an int64."""
    record = builders.consumer_group_epoch_record("grp", 7, metadata_hash=0x1122334455667788)
    decoded = roundtrip(record, i16(3) + string("grp"), i16(0) + i32(7) + tags((0, i64(0x1122334455667788))))
    assert decoded.value.metadata_hash == 0x1122334455667788


def test_group_epoch_tombstone() -> None:
    record = builders.consumer_group_epoch_tombstone("grp")
    roundtrip(record, i16(3) + string("grp"), None)


# -- type 4: ConsumerGroupPartitionMetadata (read, never written) ---------------------------------------------


def test_partition_metadata_value_as_kafka_4_0_wrote_it_decodes() -> None:
    """Kafka 4.0's subscription metadata: topics with id, name, partition count and (unused since 4.0)
    racks per partition. kcoord only decodes it, and writes its tombstone."""
    partition = i32(0) + carray([cstring("rack-a")]) + NO_TAGS
    topic = FOO.bytes + cstring("orders") + i32(3) + carray([partition]) + NO_TAGS
    raw = i16(0) + carray([topic]) + NO_TAGS
    decoded = decode_record(i16(4) + string("grp"), raw)
    assert decoded is not None and decoded.key == ConsumerGroupPartitionMetadataKey(group_id="grp")
    (only,) = decoded.value.topics
    assert (only.topic_id, only.topic_name, only.num_partitions) == (FOO, "orders", 3)
    assert only.partition_metadata[0].racks == ["rack-a"]
    assert encode_record(builders.consumer_group_subscription_metadata_tombstone("grp")) == (
        i16(4) + string("grp"),
        None,
    )


# -- type 5: ConsumerGroupMemberMetadata ------------------------------------------------------------------------


def test_member_subscription_record_golden_consumer_protocol_member() -> None:
    """newConsumerGroupMemberSubscriptionRecord for a member of the consumer protocol: every
    nullable string as given, topics in order, and ClassicMemberMetadata (tag 0) written as null,
    as Kafka's generated writer does for a null with an empty default. In a tagged field the
    generator writes a nullable struct's presence as an unsigned varint (0 null, 1 present), not
    the int8 -1 of a regular field: the bytes below are what Kafka 4.0 wrote for such a member
    (read back from its __consumer_offsets, 2026-11-26)."""
    member = ConsumerGroupMember(
        "m-1",
        instance_id="inst-1",
        rack_id=None,
        client_id="client",
        client_host="/10.0.0.7",
        subscribed_topic_names=frozenset({"orders", "audit"}),
        subscribed_topic_regex="",
        server_assignor="uniform",
        rebalance_timeout_ms=300_000,
    )
    expected = (
        i16(0)
        + cstring("inst-1")
        + cstring(None)
        + cstring("client")
        + cstring("/10.0.0.7")
        + carray([cstring("audit"), cstring("orders")])
        + cstring("")
        + i32(300_000)
        + cstring("uniform")
        + tags((0, b"\x00"))
    )
    record = builders.consumer_group_member_subscription_record("grp", member)
    decoded = roundtrip(record, i16(5) + string("grp") + string("m-1"), expected)
    assert ConsumerGroupMember("m-1").with_member_metadata(decoded.value) == member


def test_member_subscription_record_golden_classic_protocol_member() -> None:
    """A member that joined with JoinGroup: its session timeout and protocols in tag 0, after the
    struct's presence (1, an unsigned varint in a tagged field)."""
    member = ConsumerGroupMember(
        "m-2",
        client_id="c",
        client_host="h",
        subscribed_topic_names=frozenset({"t"}),
        subscribed_topic_regex=None,
        rebalance_timeout_ms=1000,
        classic_member_metadata=ClassicMemberMetadata(30_000, (("range", b"\x01\x02"),)),
    )
    classic = b"\x01" + i32(30_000) + carray([cstring("range") + cbytes(b"\x01\x02") + NO_TAGS]) + NO_TAGS
    expected = (
        i16(0)
        + cstring(None)
        + cstring(None)
        + cstring("c")
        + cstring("h")
        + carray([cstring("t")])
        + cstring(None)
        + i32(1000)
        + cstring(None)
        + tags((0, classic))
    )
    record = builders.consumer_group_member_subscription_record("grp", member)
    decoded = roundtrip(record, i16(5) + string("grp") + string("m-2"), expected)
    rebuilt = ConsumerGroupMember("m-2").with_member_metadata(decoded.value)
    assert rebuilt == member and rebuilt.uses_classic_protocol


# -- types 6 and 7: target assignment -------------------------------------------------------------------------


def test_target_assignment_epoch_record_golden() -> None:
    """newConsumerGroupTargetAssignmentEpochRecord; AssignmentTimestamp (tag 0, KIP-1263, 4.3+) only when set."""
    key = i16(6) + string("grp")
    roundtrip(
        builders.consumer_group_target_assignment_epoch_record("grp", 12), key, i16(0) + i32(12) + NO_TAGS
    )
    roundtrip(
        builders.consumer_group_target_assignment_epoch_record(
            "grp", 12, assignment_timestamp_ms=1_763_800_000_000
        ),
        key,
        i16(0) + i32(12) + tags((0, i64(1_763_800_000_000))),
    )
    roundtrip(builders.consumer_group_target_assignment_epoch_tombstone("grp"), key, None)


def test_target_assignment_record_golden() -> None:
    """newConsumerGroupTargetAssignmentRecord: topics by id, partitions in ascending order."""
    record = builders.consumer_group_target_assignment_record("grp", "m-1", {BAR: [2], FOO: {5, 1, 3}})
    topic_foo = FOO.bytes + carray([i32(1), i32(3), i32(5)]) + NO_TAGS
    topic_bar = BAR.bytes + carray([i32(2)]) + NO_TAGS
    expected = i16(0) + carray([topic_foo, topic_bar]) + NO_TAGS
    roundtrip(record, i16(7) + string("grp") + string("m-1"), expected)


# -- type 8: current assignment ----------------------------------------------------------------------------------


def test_current_assignment_record_golden_with_assignment_and_revocation_epochs() -> None:
    """newConsumerGroupCurrentAssignmentRecord as Kafka 4.3 writes it (KIP-1251's AssignmentEpochs,
    tag 0 of each TopicPartitions, parallel to Partitions), plus kcoord's revocation epoch: tag
    0x4B43 of the value, an int32."""
    member = ConsumerGroupMember(
        "m-1",
        member_epoch=9,
        previous_member_epoch=8,
        state=MemberState.UNREVOKED_PARTITIONS,
        assigned_partitions={FOO: {0: 4, 2: 9}},
        partitions_pending_revocation={BAR: {1: 6}},
        revocation_epoch=5,
    )
    assigned = FOO.bytes + carray([i32(0), i32(2)]) + tags((0, carray([i32(4), i32(9)])))
    pending = BAR.bytes + carray([i32(1)]) + tags((0, carray([i32(6)])))
    expected = (
        i16(0) + i32(9) + i32(8) + i8(1) + carray([assigned]) + carray([pending]) + tags((0x4B43, i32(5)))
    )
    record = builders.consumer_group_current_assignment_record("grp", member)
    decoded = roundtrip(record, i16(8) + string("grp") + string("m-1"), expected)
    assert uvarint(0x4B43) == b"\xc3\x96\x01"
    assert ConsumerGroupMember("m-1").with_current_assignment(decoded.value) == member


def test_current_assignment_as_kafka_4_2_wrote_it_decodes_with_the_member_epoch() -> None:
    """A record without AssignmentEpochs (Kafka before KIP-1251) nor kcoord's tag: every partition
    takes the record's member epoch, and the revocation epoch is unknown (strict fencing)."""
    topic = FOO.bytes + carray([i32(0), i32(1)]) + NO_TAGS
    raw = i16(0) + i32(5) + i32(4) + i8(0) + carray([topic]) + carray([]) + NO_TAGS
    decoded = decode_record(i16(8) + string("grp") + string("m-1"), raw)
    assert decoded is not None
    member = ConsumerGroupMember("m-1").with_current_assignment(decoded.value)
    assert member.assigned_partitions == {FOO: {0: 5, 1: 5}}
    assert member.revocation_epoch == -1
    # A static member that left (-2) gets 0, never a negative epoch.
    assert partition_epochs_from_record(decoded.value.assigned_partitions, -2) == {FOO: {0: 0, 1: 0}}


def test_current_assignment_with_mismatched_epochs_falls_back_to_the_member_epoch() -> None:
    """Kafka logs an error and uses the record's member epoch for the whole topic."""
    topic = FOO.bytes + carray([i32(0), i32(1), i32(2)]) + tags((0, carray([i32(3)])))
    raw = i16(0) + i32(7) + i32(6) + i8(0) + carray([topic]) + carray([]) + NO_TAGS
    decoded = decode_record(i16(8) + string("grp") + string("m-1"), raw)
    assert decoded is not None
    assert partition_epochs_from_record(decoded.value.assigned_partitions, 7) == {FOO: {0: 7, 1: 7, 2: 7}}


def test_current_assignment_empty_member_golden() -> None:
    """No partitions: empty arrays, and no AssignmentEpochs to write."""
    member = ConsumerGroupMember("m-1", member_epoch=1, previous_member_epoch=0)
    expected = i16(0) + i32(1) + i32(0) + i8(0) + carray([]) + carray([]) + tags((0x4B43, i32(0)))
    roundtrip(
        builders.consumer_group_current_assignment_record("grp", member),
        i16(8) + string("grp") + string("m-1"),
        expected,
    )


# -- type 16: regular expressions --------------------------------------------------------------------------------


def test_regular_expression_record_golden() -> None:
    """newConsumerGroupRegularExpressionRecord: the resolved topics, the metadata version, the time."""
    resolved = ResolvedRegularExpression(frozenset({"orders-b", "orders-a"}), version=42, timestamp_ms=1_000)
    record = builders.consumer_group_regular_expression_record("grp", "orders-.*", resolved)
    expected = i16(0) + carray([cstring("orders-a"), cstring("orders-b")]) + i64(42) + i64(1_000) + NO_TAGS
    roundtrip(record, i16(16) + string("grp") + string("orders-.*"), expected)
    roundtrip(
        builders.consumer_group_regular_expression_tombstone("grp", "orders-.*"),
        i16(16) + string("grp") + string("orders-.*"),
        None,
    )


# -- versions ------------------------------------------------------------------------------------------------------


def test_newer_consumer_value_version_is_read_as_v0() -> None:
    """KIP-915: a later value version may only add tagged fields; an unknown tag is kept."""
    raw = i16(1) + i32(7) + tags((5, b"hi"))
    decoded = decode_record(i16(3) + string("grp"), raw)
    assert decoded is not None and decoded.value.epoch == 7
    assert decoded.value.unknown_tagged == [(5, b"hi")]


def test_unknown_record_types_are_skipped() -> None:
    """Share and streams group records (types 9-15, 17+) are not kcoord's: skipped on load."""
    for rtype in (9, 10, 15, 17, 22):
        assert decode_record(i16(rtype) + string("grp"), i16(0)) is None


# What Kafka 4.0 wrote to its own __consumer_offsets for a librdkafka member of the consumer protocol
# (group "kg", read back 2026-11-26): ClassicMemberMetadata null as tag 0, size 1, varint 0.
KAFKA_4_0_MEMBER_KEY = bytes.fromhex("000500026b6700165739745970534b71544c654d68666c712f5734586441")
KAFKA_4_0_MEMBER_VALUE = bytes.fromhex("00000000036b320b2f3132372e302e302e3102027401000493e00001000100")


@pytest.mark.parametrize("backend", ["python", "c"])
def test_member_metadata_value_as_kafka_4_0_wrote_it_decodes_and_reencodes(backend: str) -> None:
    """A null tagged nullable struct is presence varint 0; reading it as the int8 of a regular field
    took 0 for "present" and ran off the end (kcoord's analytics failed on Kafka's topic so)."""
    cls = records.ConsumerGroupMemberMetadataValue
    decoders = cls._PY_DECODERS if backend == "python" else cls._C_DECODERS
    if not decoders:
        pytest.skip("the C extension is not built here")
    value, end = decoders[0](KAFKA_4_0_MEMBER_VALUE, 2, len(KAFKA_4_0_MEMBER_VALUE))
    assert end == len(KAFKA_4_0_MEMBER_VALUE)
    assert value.classic_member_metadata is None
    assert (value.instance_id, value.client_id, value.client_host) == (None, "k2", "/127.0.0.1")
    assert (value.subscribed_topic_names, value.subscribed_topic_regex) == (["t"], "")
    assert (value.rebalance_timeout_ms, value.server_assignor) == (300_000, None)
    record = decode_record(KAFKA_4_0_MEMBER_KEY, KAFKA_4_0_MEMBER_VALUE)
    assert record is not None
    assert encode_record(record) == (KAFKA_4_0_MEMBER_KEY, KAFKA_4_0_MEMBER_VALUE)


@pytest.mark.parametrize("backend", ["python", "c"])
def test_member_metadata_value_kcoord_wrote_before_matching_kafka_still_loads(backend: str) -> None:
    """kcoord's internal topics written before the fix hold an int8 -1 (0xff) as that presence."""
    cls = records.ConsumerGroupMemberMetadataValue
    decoders = cls._PY_DECODERS if backend == "python" else cls._C_DECODERS
    if not decoders:
        pytest.skip("the C extension is not built here")
    old = KAFKA_4_0_MEMBER_VALUE[:-1] + b"\xff"
    value, end = decoders[0](old, 2, len(old))
    assert end == len(old) and value.classic_member_metadata is None and value.client_id == "k2"
