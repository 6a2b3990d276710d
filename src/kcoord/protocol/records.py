"""The stored record formats of Kafka's ``__consumer_offsets`` topic, which kcoord writes too.

A record key is ``int16 type`` followed by the key struct; a value is ``int16 version``
followed by the value struct; a ``None`` value is a tombstone. kcoord writes:

- type 1 :class:`OffsetCommitKey` → :class:`OffsetCommitValue` v3 (v1 when an explicit expire
  timestamp applies);
- type 2 :class:`GroupMetadataKey` → :class:`GroupMetadataValue` v3 ("member metadata V3",
  with ``group.instance.id``);
- the KIP-848 consumer-group records, every value v0 (flexible), as Kafka 4.x writes them:
  type 3 ConsumerGroupMetadata (group epoch; ``MetadataHash`` tag, 4.1+), 5 ConsumerGroupMemberMetadata,
  6 ConsumerGroupTargetAssignmentMetadata (assignment epoch; ``AssignmentTimestamp`` tag, 4.3+),
  7 ConsumerGroupTargetAssignmentMember, 8 ConsumerGroupCurrentMemberAssignment (KIP-1251's
  ``AssignmentEpochs`` tag per topic, 4.3+; and kcoord's revocation epoch, below), 16
  ConsumerGroupRegularExpression. Type 4 ConsumerGroupPartitionMetadata is read, never written: Kafka
  4.1 replaced it with the metadata hash (KIP-1101) and only writes its tombstone.

Byte layouts are exactly Kafka's, so Kafka's own tooling can read kcoord's topic. The additions:
a tagged field of kcoord's own in ConsumerGroupCurrentMemberAssignmentValue (see
:data:`REVOCATION_EPOCH_TAG`), which Kafka's readers keep and skip; and, for a classic group too
large for one record, a GroupMetadataValue v4 whose members live in kcoord's own part records
(:class:`GroupMetadataPartKey`, :data:`GROUP_METADATA_PARTS_TAG`), a record type Kafka's readers skip.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from .codec import Message, c_offset_commit_pair
from .coordinator_records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
)
from .primitives import INT16, INT32, CodecError

__all__ = [
    "CONSUMER_GROUP_KEYS",
    "CONSUMER_GROUP_VALUE_VERSION",
    "GROUP_METADATA_TYPE",
    "GROUP_METADATA_VALUE_VERSION",
    "OFFSET_COMMIT_TYPE",
    "OFFSET_COMMIT_VALUE_VERSION",
    "OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY",
    "RECORD_TYPES",
    "REVOCATION_EPOCH_TAG",
    "ConsumerGroupCurrentMemberAssignmentKey",
    "ConsumerGroupCurrentMemberAssignmentValue",
    "ConsumerGroupMemberMetadataKey",
    "ConsumerGroupMemberMetadataValue",
    "ConsumerGroupMetadataKey",
    "ConsumerGroupMetadataValue",
    "ConsumerGroupPartitionMetadataKey",
    "ConsumerGroupPartitionMetadataValue",
    "ConsumerGroupRegularExpressionKey",
    "ConsumerGroupRegularExpressionValue",
    "ConsumerGroupTargetAssignmentMemberKey",
    "ConsumerGroupTargetAssignmentMemberValue",
    "ConsumerGroupTargetAssignmentMetadataKey",
    "ConsumerGroupTargetAssignmentMetadataValue",
    "GROUP_METADATA_PARTS_TAG",
    "GROUP_METADATA_PART_TYPE",
    "GroupMetadataKey",
    "GroupMetadataPartKey",
    "GroupMetadataValue",
    "GroupParts",
    "MemberMetadata",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "EndTxnMarker",
    "LogEntry",
    "Record",
    "TransactionalRecords",
    "decode_record",
    "encode_key",
    "encode_record",
    "encode_value",
    "group_metadata_record_size",
    "group_part_record_size",
    "group_parts_of",
    "group_parts_tag",
    "member_metadata_size",
    "revocation_epoch_of",
    "revocation_epoch_tag",
]

MemberMetadata = GroupMetadataValue.MemberMetadata

OFFSET_COMMIT_TYPE = 1
GROUP_METADATA_TYPE = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3
# Every KIP-848 value has one version, 0, in Kafka's specs up to trunk: later fields are tagged.
CONSUMER_GROUP_VALUE_VERSION = 0

# Keys have a single version, 0, in Kafka's coordinator-key specs; the record type in front of the
# key is what tells them apart (kcoord's older copies numbered key versions after the record type).
KEY_VERSION = 0

# key class -> the record type written in front of it, and the value class its records hold
RECORD_TYPES: dict[type[Message], int] = {
    OffsetCommitKey: OFFSET_COMMIT_TYPE,
    GroupMetadataKey: GROUP_METADATA_TYPE,
    ConsumerGroupMetadataKey: 3,
    ConsumerGroupPartitionMetadataKey: 4,
    ConsumerGroupMemberMetadataKey: 5,
    ConsumerGroupTargetAssignmentMetadataKey: 6,
    ConsumerGroupTargetAssignmentMemberKey: 7,
    ConsumerGroupCurrentMemberAssignmentKey: 8,
    ConsumerGroupRegularExpressionKey: 16,
}
_VALUE_CLASSES: dict[type[Message], type[Message]] = {
    OffsetCommitKey: OffsetCommitValue,
    GroupMetadataKey: GroupMetadataValue,
    ConsumerGroupMetadataKey: ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey: ConsumerGroupPartitionMetadataValue,
    ConsumerGroupMemberMetadataKey: ConsumerGroupMemberMetadataValue,
    ConsumerGroupTargetAssignmentMetadataKey: ConsumerGroupTargetAssignmentMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey: ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupCurrentMemberAssignmentKey: ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupRegularExpressionKey: ConsumerGroupRegularExpressionValue,
}
# record type -> key class (types 0 and 1 share the offset key layout)
_KEY_CLASSES: dict[int, type[Message]] = {0: OffsetCommitKey, **{t: cls for cls, t in RECORD_TYPES.items()}}
_CONSUMER_GROUP_VALUES = tuple(v for k, v in _VALUE_CLASSES.items() if RECORD_TYPES[k] > GROUP_METADATA_TYPE)

# The keys of the KIP-848 consumer-group records: each has a ``group_id``.
CONSUMER_GROUP_KEYS: tuple[type[Message], ...] = tuple(
    k for k, t in RECORD_TYPES.items() if t > GROUP_METADATA_TYPE
)

# kcoord's own tagged field in ConsumerGroupCurrentMemberAssignmentValue: the member's revocation
# epoch, an int32, for the ``revocation-epoch`` commit fencing (KAFKA-19779's first design, which
# Kafka replaced by KIP-1251's assignment epochs before shipping it). Kafka numbers a struct's tags
# from 0 upwards as it adds fields (this value has none yet at its top level, its TopicPartitions
# has tag 0), so a tag this far above them cannot meet one Kafka adds; Kafka's readers keep an
# unknown tag and skip it. It is kcoord's private number, "KC", as for its fence record type
# (docs/storage.md). Absent means "written by something that does not track it".
REVOCATION_EPOCH_TAG = 0x4B43

# A classic group whose GroupMetadata record would be larger than the log takes is stored split
# (kcoord.coordinator.core.records.group_metadata_records): its members in part records of kcoord's
# private type "KG" (key: group, write id, index; value: a GroupMetadataValue v3 holding only
# members), then its GroupMetadata record, v4, with no members and this tag naming the parts
# (write id int32, part count int32). The GroupMetadata record comes last: it commits the parts.
GROUP_METADATA_PART_TYPE = 0x4B47
GROUP_METADATA_PARTS_TAG = 0x4B43
GROUP_METADATA_SPLIT_VALUE_VERSION = 4  # the first flexible version: the one that can carry a tag
_PARTS_TAG = struct.Struct(">ii")


@dataclass(frozen=True, slots=True)
class GroupMetadataPartKey:
    """The key of one part of a split classic group: ``index`` of the parts written by one write,
    ``write_id`` (each split write of a group takes a new one, so a write never overwrites the
    parts the group's current GroupMetadata record names)."""

    group: str
    write_id: int
    index: int

    def encode(self, version: int = 0) -> bytes:
        group = self.group.encode("utf-8")
        if len(group) > 0x7FFF:
            raise CodecError("group id longer than an int16 string")
        return INT16.pack(len(group)) + group + _PARTS_TAG.pack(self.write_id, self.index)

    @classmethod
    def decode(cls, data: bytes) -> GroupMetadataPartKey:
        if len(data) < 2:
            raise CodecError("part key shorter than its group length")
        (n,) = INT16.unpack_from(data, 0)
        if n < 0 or len(data) != 2 + n + _PARTS_TAG.size:
            raise CodecError(f"part key of {len(data)} bytes with a {n}-byte group id")
        write_id, index = _PARTS_TAG.unpack_from(data, 2 + n)
        return cls(data[2 : 2 + n].decode("utf-8"), write_id, index)


@dataclass(frozen=True, slots=True)
class GroupParts:
    """What a split group's GroupMetadata record names: the write id of its parts and their count."""

    write_id: int
    count: int


def group_parts_tag(parts: GroupParts) -> tuple[int, bytes]:
    """The (tag, bytes) pair that names a split group's parts in its value's ``unknown_tagged``."""
    return GROUP_METADATA_PARTS_TAG, _PARTS_TAG.pack(parts.write_id, parts.count)


def group_parts_of(value: GroupMetadataValue) -> GroupParts | None:
    """The parts a GroupMetadata value names, or None for a whole (unsplit) value."""
    for tag, raw in value.unknown_tagged or ():
        if tag == GROUP_METADATA_PARTS_TAG:
            if len(raw) != _PARTS_TAG.size:
                raise CodecError(f"group parts tag of {len(raw)} bytes, expected {_PARTS_TAG.size}")
            write_id, count = _PARTS_TAG.unpack(raw)
            return GroupParts(write_id, count)
    return None


@dataclass(frozen=True, slots=True)
class Record:
    """One change to a shard's state: a key struct and a value struct, or ``None`` for a tombstone."""

    key: Any
    value: Any | None

    @property
    def is_tombstone(self) -> bool:
        return self.value is None


@dataclass(frozen=True, slots=True)
class TransactionalRecords:
    """The records of one transactional batch in a shard's log, with the batch's producer (a
    transactional offset commit written as part of a client's transaction). Its offset commits stay
    pending until that producer id's :class:`EndTxnMarker` (Kafka's ``replay(offset, producerId,
    producerEpoch, record)`` with a producer id other than ``NO_PRODUCER_ID``)."""

    producer_id: int
    producer_epoch: int
    records: list[Record]


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    """A transaction marker (control batch) in a shard's log: the transaction coordinator ended
    ``producer_id``'s transaction, committed or aborted (Kafka's ``replayEndTransactionMarker``)."""

    producer_id: int
    producer_epoch: int
    committed: bool


# What a shard's log yields on read, in log order: a list of plain (non-transactional) records, or
# one transactional batch, or one marker. Plain records stay in lists so the common path replays
# them with no per-record type test.
LogEntry = list[Record] | TransactionalRecords | EndTxnMarker


def revocation_epoch_tag(epoch: int) -> tuple[int, bytes]:
    """The (tag, bytes) pair that carries a revocation epoch in a value's ``unknown_tagged``."""
    return REVOCATION_EPOCH_TAG, INT32.pack(epoch)


def revocation_epoch_of(value: ConsumerGroupCurrentMemberAssignmentValue) -> int | None:
    """The revocation epoch kcoord stored in a current-assignment value, or None if it has none."""
    for tag, raw in value.unknown_tagged or ():
        if tag == REVOCATION_EPOCH_TAG:
            if len(raw) != INT32.size:
                raise CodecError(f"revocation epoch tag of {len(raw)} bytes, expected {INT32.size}")
            epoch: int = INT32.unpack(raw)[0]
            return epoch
    return None


def encode_key(key: Any) -> bytes:
    if type(key) is GroupMetadataPartKey:
        return INT16.pack(GROUP_METADATA_PART_TYPE) + key.encode()
    rtype = RECORD_TYPES.get(type(key))
    if rtype is None:
        raise CodecError(f"not a record key: {type(key).__name__}")
    encoded: bytes = key.encode(KEY_VERSION)
    return INT16.pack(rtype) + encoded


def encode_value(value: Any | None) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, OffsetCommitValue):
        version = (
            OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
            if value.expire_timestamp != -1
            else OFFSET_COMMIT_VALUE_VERSION
        )
        return INT16.pack(version) + value.encode(version)
    if isinstance(value, GroupMetadataValue):
        # v3 as Kafka writes it; v4 (flexible) only for the tag that names a split group's parts.
        version = GROUP_METADATA_SPLIT_VALUE_VERSION if value.unknown_tagged else GROUP_METADATA_VALUE_VERSION
        return INT16.pack(version) + value.encode(version)
    if isinstance(value, _CONSUMER_GROUP_VALUES):
        return INT16.pack(CONSUMER_GROUP_VALUE_VERSION) + value.encode(CONSUMER_GROUP_VALUE_VERSION)
    raise CodecError(f"not a record value: {type(value).__name__}")


def encode_record(record: Record) -> tuple[bytes, bytes | None]:
    key = record.key
    if type(key) is OffsetCommitKey:  # nearly every record written: the offset commit's own encoder
        pair = _offset_commit_pair(key, record.value)
        if pair is not None:
            return pair
    return encode_key(key), encode_value(record.value)


_OFFSET_KEY_HEAD = struct.Struct(">hh")  # record type, group length
_OFFSET_VALUE_V3_HEAD = struct.Struct(">hqih")  # value version, offset, leader epoch, metadata length
_INT64 = struct.Struct(">q")
_MAX_INT16_STRING = 0x7FFF


def _offset_commit_pair(key: OffsetCommitKey, value: Any | None) -> tuple[bytes, bytes | None] | None:
    """An offset commit record (key v0, value v3 or a tombstone) by hand: the generic encoders
    build it in about 2.3 µs, this in under 1 (a record per commit), and in C
    (``_cdecode.offset_commit_pair``) for ASCII strings in about 0.2. The same bytes
    (``tests/unit/test_records_fast_path.py``); None for anything it does not cover (a v1 value
    with an expire timestamp, a None or too long string), which the generic encoders handle,
    refusals included."""
    group, topic, metadata = key.group, key.topic, None
    if type(group) is not str or type(topic) is not str:
        return None
    if value is not None:
        metadata = value.metadata
        if value.expire_timestamp != -1 or type(metadata) is not str:
            return None
    if c_offset_commit_pair is not None:  # ASCII strings (group ids and topics nearly always are)
        if value is None:
            pair = c_offset_commit_pair(
                OFFSET_COMMIT_TYPE, OFFSET_COMMIT_VALUE_VERSION, group, topic, key.partition
            )
        else:
            pair = c_offset_commit_pair(
                OFFSET_COMMIT_TYPE, OFFSET_COMMIT_VALUE_VERSION, group, topic, key.partition,
                value.offset, value.leader_epoch, metadata, value.commit_timestamp,
            )  # fmt: skip
        if pair is not None:
            return pair
    g = group.encode("utf-8")
    t = topic.encode("utf-8")
    if len(g) > _MAX_INT16_STRING or len(t) > _MAX_INT16_STRING:
        return None
    try:
        key_bytes = (
            _OFFSET_KEY_HEAD.pack(OFFSET_COMMIT_TYPE, len(g))
            + g
            + INT16.pack(len(t))
            + t
            + INT32.pack(key.partition)
        )
        if value is None:
            return key_bytes, None
        md = metadata.encode("utf-8")  # type: ignore[union-attr]  # checked to be a str above
        if len(md) > _MAX_INT16_STRING:
            return None
        head = _OFFSET_VALUE_V3_HEAD.pack(
            OFFSET_COMMIT_VALUE_VERSION, value.offset, value.leader_epoch, len(md)
        )
        return key_bytes, head + md + _INT64.pack(value.commit_timestamp)
    except struct.error:  # a number out of its field's range: the generic encoder's CodecError
        return None


def _utf8_len(s: str | None) -> int:
    """Bytes of a (nullable) int16-length string as encoded: its length prefix and UTF-8."""
    if s is None:
        return 2
    return 2 + (len(s) if s.isascii() else len(s.encode("utf-8")))


# A GroupMetadataValue v3 without its strings and byte arrays: value version, generation,
# current state timestamp, member count; a member's rebalance and session timeouts and the int32
# lengths of its subscription and assignment.
_GROUP_VALUE_FIXED = 2 + 4 + 8 + 4
_MEMBER_FIXED = 4 + 4 + 4 + 4


def group_metadata_record_size(record: Record) -> int:
    """The stored size (key + value bytes) of a GroupMetadata record as :func:`encode_record` writes
    it (value v3), from its fields' lengths: a writer learns whether the log can take a group's
    record without encoding it first (the log encodes it once, when it writes it)."""
    key, value = record.key, record.value
    size = 2 + _utf8_len(key.group)  # record type + key
    if value is None:
        return size
    size += (
        _GROUP_VALUE_FIXED
        + _utf8_len(value.protocol_type)
        + _utf8_len(value.protocol)
        + _utf8_len(value.leader)
    )
    for mb in value.members:
        size += member_metadata_size(mb)
    return size


def member_metadata_size(mb: MemberMetadata) -> int:
    """The bytes one member takes in a GroupMetadataValue v3."""
    return (
        _MEMBER_FIXED + _utf8_len(mb.member_id) + _utf8_len(mb.group_instance_id) + _utf8_len(mb.client_id)
        + _utf8_len(mb.client_host) + len(mb.subscription) + len(mb.assignment)
    )  # fmt: skip


def group_part_record_size(group: str, members_size: int) -> int:
    """The stored size (key + value bytes) of a part record whose members take ``members_size``
    bytes (:func:`member_metadata_size`): its value is a v3 value with an empty protocol type,
    null protocol and leader."""
    key = 2 + _utf8_len(group) + _PARTS_TAG.size
    return key + _GROUP_VALUE_FIXED + _utf8_len("") + 2 * _utf8_len(None) + members_size


def decode_record(key: bytes, value: bytes | None) -> Record | None:
    """Decode a stored record; ``None`` for record types kcoord does not know (skipped on load)."""
    if len(key) < 2:
        raise CodecError("record key shorter than its type")
    (rtype,) = INT16.unpack_from(key, 0)
    if rtype == GROUP_METADATA_PART_TYPE:
        part_key = GroupMetadataPartKey.decode(key[2:])
        if value is None:
            return Record(part_key, None)
        if len(value) < 2:
            raise CodecError("record value shorter than its version")
        (part_version,) = INT16.unpack_from(value, 0)
        top_version = GroupMetadataValue.SCHEMA.valid.high or 0
        return Record(part_key, GroupMetadataValue.decode_from(value, 2, min(part_version, top_version))[0])
    key_cls = _KEY_CLASSES.get(rtype)
    if key_cls is None:
        return None
    k = key_cls.decode(key[2:], KEY_VERSION)
    if value is None:
        return Record(k, None)
    if len(value) < 2:
        raise CodecError("record value shorter than its version")
    (vversion,) = INT16.unpack_from(value, 0)
    value_cls = _VALUE_CLASSES[key_cls]
    # Versions newer than the schema may only add tagged fields (KIP-915); read them as our newest.
    top = value_cls.SCHEMA.valid.high or 0
    v = value_cls.decode_from(value, 2, min(vversion, top))[0]
    return Record(k, v)
