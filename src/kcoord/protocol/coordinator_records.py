"""The record structs Kafka's group coordinator stores in ``__consumer_offsets``, generated from
``protocol/schemas`` (Kafka's ``group-coordinator/src/main/resources/common/message`` specs).

Each spec is a ``coordinator-key`` or ``coordinator-value`` whose ``apiKey`` is the record type
written in front of it: type 1 OffsetCommit, 2 GroupMetadata (classic groups), and the KIP-848
consumer-group records, types 3-8 and 16. Keys have one version (0); values are versioned by the
int16 that precedes them. How records are framed and which versions kcoord writes is
:mod:`kcoord.protocol.records`' business; this module only builds the classes (typed by
``coordinator_records.pyi``, written by :mod:`kcoord.protocol.stubgen`).
"""

from __future__ import annotations

from .codegen import Message, build_message_class
from .schema import load_schema

# Record type -> spec stem: the key spec is ``<stem>Key``, the value spec ``<stem>Value``.
RECORD_STEMS: dict[int, str] = {
    1: "OffsetCommit",
    2: "GroupMetadata",
    3: "ConsumerGroupMetadata",
    4: "ConsumerGroupPartitionMetadata",
    5: "ConsumerGroupMemberMetadata",
    6: "ConsumerGroupTargetAssignmentMetadata",
    7: "ConsumerGroupTargetAssignmentMember",
    8: "ConsumerGroupCurrentMemberAssignment",
    16: "ConsumerGroupRegularExpression",
}

# Every generated record class by name; each is a module attribute too.
CLASSES: dict[str, type[Message]] = {}
for _stem in RECORD_STEMS.values():
    for _part in ("Key", "Value"):
        _cls = build_message_class(load_schema(_stem + _part))
        CLASSES[_cls.__name__] = _cls


globals().update(CLASSES)
