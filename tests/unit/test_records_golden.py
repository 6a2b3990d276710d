"""Golden vectors for the records kcoord stores in its ``__consumer_offsets``-format topic.

The expected bytes are written out by hand from Kafka's published layouts (apache/kafka
``group-coordinator/src/main/resources/common/message/{OffsetCommitKey,OffsetCommitValue,
GroupMetadataKey,GroupMetadataValue}.json`` and ``GroupCoordinatorRecordSerde``): key = int16
record type + key struct, value = int16 value version + value struct, classic (non-flexible)
encodings up to v3. They are deliberately *not* produced with our codec, so a schema or codegen
mistake cannot hide behind itself — this is what lets Kafka's tooling read kcoord's topic.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings

from kcoord.protocol import records
from kcoord.protocol.primitives import CodecError
from kcoord.protocol.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    decode_record,
    encode_record,
)
from tests.unit.test_codec_roundtrip import canon, message_strategy

# -- hand encoders for Kafka's classic primitive types ----------------------------------------------------


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def string(s: str | None) -> bytes:
    """STRING / NULLABLE_STRING: int16 byte length (-1 for null) + UTF-8."""
    if s is None:
        return i16(-1)
    raw = s.encode("utf-8")
    return i16(len(raw)) + raw


def blob(b: bytes) -> bytes:
    """BYTES: int32 length + raw bytes."""
    return i32(len(b)) + b


# -- fixtures ----------------------------------------------------------------------------------------------

SUBSCRIPTION = b"\x00\x01\x00\x00\x00\x01\x00\x06orders\xff\xff\xff\xff"
ASSIGNMENT = (
    b"\x00\x01\x00\x00\x00\x01\x00\x06orders\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x01\xff\xff\xff\xff"
)


def _members() -> list[MemberMetadata]:
    return [
        MemberMetadata(
            member_id="consumer-1-4b7c",
            group_instance_id="instance-α",
            client_id="consumer-1",
            client_host="/10.0.0.7",
            rebalance_timeout=300000,
            session_timeout=45000,
            subscription=SUBSCRIPTION,
            assignment=ASSIGNMENT,
        ),
        MemberMetadata(
            member_id="consumer-2-9f00",
            group_instance_id=None,
            client_id="consumer-2",
            client_host="/10.0.0.8",
            rebalance_timeout=60000,
            session_timeout=10000,
            subscription=b"",
            assignment=b"",
        ),
    ]


def _group_value() -> GroupMetadataValue:
    return GroupMetadataValue(
        protocol_type="consumer",
        generation=12,
        protocol="range",
        leader="consumer-1-4b7c",
        current_state_timestamp=1_763_800_000_123,
        members=_members(),
    )


# -- keys -----------------------------------------------------------------------------------------------------


def test_offset_commit_key_golden() -> None:
    """Type 1: group, topic, partition."""
    key = OffsetCommitKey(group="payments", topic="orders-ü", partition=17)
    expected = i16(1) + string("payments") + string("orders-ü") + i32(17)
    assert encode_record(Record(key, None))[0] == expected
    assert decode_record(expected, None) == Record(key, None)


def test_group_metadata_key_golden() -> None:
    """Type 2: just the group id."""
    expected = i16(2) + string("payments")
    assert encode_record(Record(GroupMetadataKey(group="payments"), None))[0] == expected
    assert decode_record(expected, None) == Record(GroupMetadataKey(group="payments"), None)


def test_legacy_offset_commit_key_type_0_decodes() -> None:
    """Type 0 (pre-0.10 brokers) shares the offset key layout; Kafka still reads it."""
    raw = i16(0) + string("g") + string("t") + i32(3)
    value = i16(3) + i64(5) + i32(-1) + string("") + i64(1)
    rec = decode_record(raw, value)
    assert rec is not None
    assert rec.key == OffsetCommitKey(group="g", topic="t", partition=3)
    assert rec.value.offset == 5


# -- offset commit values -----------------------------------------------------------------------------------


def test_offset_commit_value_v3_golden() -> None:
    """What kcoord writes for a commit without explicit retention: v3 with the leader epoch."""
    value = OffsetCommitValue(
        offset=1234567890123, leader_epoch=7, metadata="meta-✓", commit_timestamp=1_763_800_000_000
    )
    expected = i16(3) + i64(1234567890123) + i32(7) + string("meta-✓") + i64(1_763_800_000_000)
    key = OffsetCommitKey(group="g", topic="t", partition=0)
    assert encode_record(Record(key, value))[1] == expected
    decoded = decode_record(encode_record(Record(key, value))[0], expected)
    assert decoded is not None and decoded.value == value


def test_offset_commit_value_v1_golden_when_expire_timestamp_is_set() -> None:
    """An explicit expire timestamp needs v1 (the only version that has it); v1 has no leader epoch."""
    value = OffsetCommitValue(
        offset=42, leader_epoch=9, metadata="", commit_timestamp=1_000, expire_timestamp=2_000
    )
    expected = i16(1) + i64(42) + string("") + i64(1_000) + i64(2_000)
    key = OffsetCommitKey(group="g", topic="t", partition=0)
    assert encode_record(Record(key, value))[1] == expected
    decoded = decode_record(encode_record(Record(key, value))[0], expected)
    assert decoded is not None
    assert (decoded.value.offset, decoded.value.expire_timestamp, decoded.value.leader_epoch) == (
        42,
        2_000,
        -1,
    )


def test_offset_commit_value_v0_decodes() -> None:
    """v0 (Kafka 0.9): offset, metadata, commit timestamp."""
    raw = i16(0) + i64(99) + string("m") + i64(123)
    rec = decode_record(i16(1) + string("g") + string("t") + i32(0), raw)
    assert rec is not None
    assert (rec.value.offset, rec.value.metadata, rec.value.commit_timestamp) == (99, "m", 123)
    assert rec.value.leader_epoch == -1 and rec.value.expire_timestamp == -1


def test_offset_commit_value_v4_flexible_decodes_with_tags() -> None:
    """v4 (KIP-915) is flexible: compact string and a tag buffer; unknown tags are kept."""
    raw = i16(4) + i64(8) + i32(2) + bytes([len(b"md") + 1]) + b"md" + i64(77) + b"\x01\x05\x02hi"
    rec = decode_record(i16(1) + string("g") + string("t") + i32(0), raw)
    assert rec is not None
    assert (rec.value.offset, rec.value.leader_epoch, rec.value.metadata, rec.value.commit_timestamp) == (
        8,
        2,
        "md",
        77,
    )
    assert rec.value.unknown_tagged == [(5, b"hi")]


def test_value_version_newer_than_schema_is_read_as_newest() -> None:
    """KIP-915: future value versions only add tagged fields, so v5 is read with the v4 layout."""
    raw = i16(5) + i64(8) + i32(2) + b"\x01" + i64(77) + b"\x00"
    rec = decode_record(i16(1) + string("g") + string("t") + i32(0), raw)
    assert rec is not None and rec.value.offset == 8 and rec.value.metadata == ""


# -- group metadata values ----------------------------------------------------------------------------------


def _member_v3(m: MemberMetadata) -> bytes:
    return (
        string(m.member_id)
        + string(m.group_instance_id)
        + string(m.client_id)
        + string(m.client_host)
        + i32(m.rebalance_timeout)
        + i32(m.session_timeout)
        + blob(m.subscription)
        + blob(m.assignment)
    )


def test_group_metadata_value_v3_golden() -> None:
    """Member metadata V3: the layout kcoord writes, with group.instance.id per member."""
    value = _group_value()
    expected = (
        i16(3)
        + string("consumer")
        + i32(12)
        + string("range")
        + string("consumer-1-4b7c")
        + i64(1_763_800_000_123)
        + i32(2)
        + b"".join(_member_v3(m) for m in value.members)
    )
    key = GroupMetadataKey(group="payments")
    key_bytes, value_bytes = encode_record(Record(key, value))
    assert value_bytes == expected
    assert decode_record(key_bytes, expected) == Record(key, value)


def test_group_metadata_value_v3_empty_group_golden() -> None:
    """An Empty group (no protocol, no leader, no members) has null strings and an empty array."""
    value = GroupMetadataValue(
        protocol_type="consumer",
        generation=3,
        protocol=None,
        leader=None,
        current_state_timestamp=5,
        members=[],
    )
    expected = i16(3) + string("consumer") + i32(3) + i16(-1) + i16(-1) + i64(5) + i32(0)
    assert encode_record(Record(GroupMetadataKey(group="g"), value))[1] == expected
    rec = decode_record(i16(2) + string("g"), expected)
    assert rec is not None and rec.value.protocol is None and rec.value.leader is None


def test_group_metadata_value_v0_decodes() -> None:
    """v0: no current-state timestamp, members without rebalance timeout or instance id."""
    raw = (
        i16(0)
        + string("consumer")
        + i32(1)
        + string("range")
        + string("m1")
        + i32(1)
        + string("m1")
        + string("cid")
        + string("/h")
        + i32(30000)
        + blob(b"sub")
        + blob(b"asg")
    )
    rec = decode_record(i16(2) + string("g"), raw)
    assert rec is not None
    v = rec.value
    assert (v.protocol_type, v.generation, v.protocol, v.leader, v.current_state_timestamp) == (
        "consumer",
        1,
        "range",
        "m1",
        -1,
    )
    (m,) = v.members
    assert (m.member_id, m.client_id, m.client_host, m.session_timeout) == ("m1", "cid", "/h", 30000)
    # v0 has no rebalance timeout: Kafka's spec defaults it to -1, which the loader reads as
    # "use the session timeout" (ClassicGroup.from_metadata_value, like Kafka's ClassicGroup.fromRecord).
    assert (m.subscription, m.assignment, m.group_instance_id, m.rebalance_timeout) == (
        b"sub",
        b"asg",
        None,
        -1,
    )


def test_group_metadata_value_v2_decodes() -> None:
    """v2: current-state timestamp and rebalance timeout, still no instance id."""
    raw = (
        i16(2)
        + string("connect")
        + i32(4)
        + string(None)
        + string(None)
        + i64(1_700_000_000_000)
        + i32(1)
        + string("w1")
        + string("worker")
        + string("/h")
        + i32(60000)
        + i32(10000)
        + blob(b"")
        + blob(b"\x00")
    )
    rec = decode_record(i16(2) + string("g"), raw)
    assert rec is not None
    v = rec.value
    assert (v.protocol_type, v.generation, v.protocol, v.leader, v.current_state_timestamp) == (
        "connect",
        4,
        None,
        None,
        1_700_000_000_000,
    )
    (m,) = v.members
    assert (m.member_id, m.rebalance_timeout, m.session_timeout, m.assignment) == (
        "w1",
        60000,
        10000,
        b"\x00",
    )


# -- tombstones, unknown types, bad input -------------------------------------------------------------------


def test_tombstones_have_no_value() -> None:
    """A deleted offset or group is its key with a null value; it decodes as a tombstone."""
    for key in (OffsetCommitKey(group="g", topic="t", partition=1), GroupMetadataKey(group="g")):
        key_bytes, value_bytes = encode_record(Record(key, None))
        assert value_bytes is None
        rec = decode_record(key_bytes, None)
        assert rec == Record(key, None) and rec.is_tombstone


@pytest.mark.parametrize("record_type", [9, 10, 15, 17, 22, 100, -1])
def test_unknown_record_types_are_skipped(record_type: int) -> None:
    """Share and streams group records (types 9-15, 17+) and future types decode to None so a load
    skips them (the KIP-848 consumer-group types are tests/unit/test_consumer_records_golden.py's)."""
    assert decode_record(i16(record_type) + b"\x00\x01g", b"\x00\x00\x00") is None
    assert decode_record(i16(record_type), None) is None


def test_short_or_malformed_records_are_codec_errors() -> None:
    with pytest.raises(CodecError):
        decode_record(b"\x00", None)
    with pytest.raises(CodecError):
        decode_record(i16(1) + string("g"), None)  # topic and partition missing
    with pytest.raises(CodecError):
        decode_record(i16(2) + string("g"), b"\x00")  # value shorter than its version
    with pytest.raises(CodecError):
        decode_record(i16(2) + string("g"), i16(3) + string("consumer"))  # truncated value
    with pytest.raises(CodecError):
        records.encode_key(OffsetCommitValue())


# -- property: whatever kcoord writes it reads back -------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(value=message_strategy(OffsetCommitValue, 3))
def test_offset_commit_records_roundtrip(value: OffsetCommitValue) -> None:
    """Without an expire timestamp kcoord writes v3; it decodes to the same value."""
    value.expire_timestamp = -1
    key = OffsetCommitKey(group="g", topic="t", partition=0)
    rec = decode_record(*encode_record(Record(key, value)))
    assert rec is not None and canon(rec.value) == canon(value)


@settings(max_examples=40, deadline=None)
@given(value=message_strategy(GroupMetadataValue, 3))
def test_group_metadata_records_roundtrip(value: GroupMetadataValue) -> None:
    key = GroupMetadataKey(group="g")
    rec = decode_record(*encode_record(Record(key, value)))
    assert rec is not None and canon(rec.value) == canon(value)
