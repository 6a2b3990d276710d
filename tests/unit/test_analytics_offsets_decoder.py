"""The offsets-topic decoder of the analytics pipeline on KIP-848 records, in the order Kafka 4.0
writes them to ``__consumer_offsets`` (and kcoord to its internal topic): each new target assignment
epoch is a generation with every member's target assignment then. No Spark session: the decoder
is the function Spark maps over each topic partition.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="pyspark is a test extra (pyproject.toml); not installed here")

from kcoord.analytics.pipeline import _decode_offsets_partition  # noqa: E402
from kcoord.protocol import records as r  # noqa: E402
from tests.unit.test_consumer_records_golden import KAFKA_4_0_MEMBER_KEY, KAFKA_4_0_MEMBER_VALUE  # noqa: E402

TOPIC_ID = uuid.UUID("e3b0d9c8-c8f0-4b6a-9cfd-0e5ec0cf1122")
G = "kg"


def row(record: r.Record, ts: int) -> dict[str, Any]:
    key, value = r.encode_record(record)
    return {"key": key, "value": value, "timestamp": ts}


def member(member_id: str, instance: str | None) -> r.Record:
    return r.Record(r.ConsumerGroupMemberMetadataKey(group_id=G, member_id=member_id),
                    r.ConsumerGroupMemberMetadataValue(instance_id=instance, client_id="c", client_host="/h",
                                                       subscribed_topic_names=["t"], classic_member_metadata=None))  # fmt: skip


def target(member_id: str, partitions: list[int] | None) -> r.Record:
    TP = r.ConsumerGroupTargetAssignmentMemberValue.TopicPartition
    value = (
        None
        if partitions is None
        else r.ConsumerGroupTargetAssignmentMemberValue(
            topic_partitions=[TP(topic_id=TOPIC_ID, partitions=partitions)]
        )
    )
    return r.Record(r.ConsumerGroupTargetAssignmentMemberKey(group_id=G, member_id=member_id), value)


def epoch(n: int) -> list[r.Record]:
    """The group epoch record before the target assignment, the assignment epoch record after it."""
    return [r.Record(r.ConsumerGroupMetadataKey(group_id=G), r.ConsumerGroupMetadataValue(epoch=n))]


def assignment_epoch(n: int) -> r.Record:
    return r.Record(r.ConsumerGroupTargetAssignmentMetadataKey(group_id=G),
                    r.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=n))  # fmt: skip


def test_kip848_target_assignment_epochs_are_generations_with_owners_and_partitions() -> None:
    TM = r.ConsumerGroupPartitionMetadataValue.TopicMetadata
    log = [
        r.Record(r.ConsumerGroupPartitionMetadataKey(group_id=G), r.ConsumerGroupPartitionMetadataValue(
            topics=[TM(topic_id=TOPIC_ID, topic_name="t", num_partitions=4, partition_metadata=[])])),
        member("m1", None), *epoch(1), target("m1", [0, 1, 2, 3]), assignment_epoch(1),
        member("m2", "i2"), *epoch(2), target("m1", [0, 1]), target("m2", [2, 3]), assignment_epoch(2),
        # m1 leaves: its records are deleted, then the next epoch gives m2 everything
        r.Record(r.ConsumerGroupCurrentMemberAssignmentKey(group_id=G, member_id="m1"), None),
        target("m1", None), r.Record(r.ConsumerGroupMemberMetadataKey(group_id=G, member_id="m1"), None),
        *epoch(3), target("m2", [0, 1, 2, 3]), assignment_epoch(3),
    ]  # fmt: skip
    rows = [row(rec, 1000 + i) for i, rec in enumerate(log)]
    # and Kafka 4.0's own bytes of a member record (a null ClassicMemberMetadata) decode among them
    rows.insert(1, {"key": KAFKA_4_0_MEMBER_KEY, "value": KAFKA_4_0_MEMBER_VALUE, "timestamp": 999})
    out = list(_decode_offsets_partition(iter(rows)))
    assert [o for o in out if o[0] != "group"] == []
    generations: dict[int, set[tuple[str, bool, str]]] = {}
    for kind, group, _, _, _, ts, gen, protocol_type, _, owner, static, tp, _, _ in out:
        assert (kind, group, protocol_type) == ("group", G, "kip848") and ts >= 1000
        generations.setdefault(gen, set()).add((owner, static, tp))
    assert generations == {
        1: {("m1", False, f"t:{p}") for p in range(4)},
        2: {("m1", False, "t:0"), ("m1", False, "t:1"), ("i2", True, "t:2"), ("i2", True, "t:3")},
        3: {("i2", True, f"t:{p}") for p in range(4)},
    }


def test_a_deleted_kip848_group_starts_over() -> None:
    log = [member("m1", None), *epoch(1), target("m1", [0]), assignment_epoch(1),
           r.Record(r.ConsumerGroupMetadataKey(group_id=G), None), *epoch(1), assignment_epoch(1)]  # fmt: skip
    out = list(_decode_offsets_partition(iter(row(rec, 5) for rec in log)))
    # the topic id names it: no subscription metadata record said its name
    assert [(o[6], o[9], o[11]) for o in out] == [(1, "m1", f"{TOPIC_ID}:0"), (1, None, None)]


def test_every_record_type_and_value_version_of_kafkas_specs_decodes() -> None:
    """Each consumer-group record type of Kafka's coordinator-record specs (kcoord's schemas are
    those files), in every value version the spec lists, with a key and a value: nothing is bad."""
    from kcoord.protocol import coordinator_records as cr

    rows = []
    for rtype, stem in cr.RECORD_STEMS.items():
        key_cls, value_cls = cr.CLASSES[stem + "Key"], cr.CLASSES[stem + "Value"]
        key = struct.pack(">h", rtype) + key_cls().encode(0)
        valid = value_cls.SCHEMA.valid
        for version in range(valid.low, (valid.high or 0) + 1):
            rows.append({"key": key, "value": struct.pack(">h", version) + value_cls().encode(version)})
    assert len(rows) == 5 + 5 + 7  # OffsetCommit v0-4, GroupMetadata v0-4, seven KIP-848 types v0
    out = list(_decode_offsets_partition(iter(numbered(rows))))
    assert [o for o in out if o[0] in ("bad", "other")] == []


def group_key(rtype: int, group: str) -> bytes:
    encoded = group.encode()
    return struct.pack(">hh", rtype, len(encoded)) + encoded + b"\x00\x01m"


def test_share_and_streams_group_records_are_counted_by_type_and_unknown_types_are_bad() -> None:
    from kcoord.analytics.pipeline import OTHER_RECORD_TYPES

    rows = [{"key": group_key(rtype, "sg"), "value": b"\x00\x00\x01"} for rtype in OTHER_RECORD_TYPES]
    rows.append({"key": group_key(99, "future"), "value": b"\x00\x00"})
    out = list(_decode_offsets_partition(iter(numbered(rows))))
    other = [(o[1], o[12]) for o in out if o[0] == "other"]
    assert other == [("sg", name) for name in OTHER_RECORD_TYPES.values()]
    bad = [(o[1], o[4], o[12].split(":")[0]) for o in out if o[0] == "bad"]
    assert bad == [("future", len(OTHER_RECORD_TYPES), "UnknownRecordType")]


def numbered(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows as the topic reader gives them: partition, offset and timestamp too."""
    return [{"partition": 0, "offset": i, "timestamp": 1000 + i, **r} for i, r in enumerate(rows)]
