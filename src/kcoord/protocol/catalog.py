"""Which of Kafka's spec files (``protocol/schemas/``) each generated module is built from.

Read by the generator (:mod:`kcoord.protocol.codegen`) and by the hand-written modules that serve
the generated classes; it imports nothing generated, so the generator works even while a
generated module is stale or missing.
"""

from __future__ import annotations

# Every API kcoord decodes (kcoord.protocol.messages): the ones it answers, the relayed ones whose
# responses it reads or rewrites (Metadata, DescribeCluster, Produce, Fetch), and the group APIs
# it refuses by name.
MESSAGE_STEMS = [
    "ApiVersions",
    "Metadata",
    "FindCoordinator",
    "JoinGroup",
    "SyncGroup",
    "Heartbeat",
    "LeaveGroup",
    "OffsetCommit",
    "OffsetFetch",
    "DescribeGroups",
    "ListGroups",
    "DeleteGroups",
    "OffsetDelete",
    "TxnOffsetCommit",
    "AddOffsetsToTxn",
    "DescribeCluster",
    "Produce",
    "Fetch",
    "ConsumerGroupHeartbeat",
    "ConsumerGroupDescribe",
]
# Headers and the consumer's embedded protocol, also in kcoord.protocol.messages.
MESSAGE_EXTRAS = [
    "RequestHeader",
    "ResponseHeader",
    "ConsumerProtocolSubscription",
    "ConsumerProtocolAssignment",
]

# The APIs only kcoord's storage speaks (kcoord.protocol.storage_messages); kept out of
# messages.REQUESTS, which is what the gateway decodes and serves.
STORAGE_STEMS = [
    "ListOffsets",
    "InitProducerId",
    "CreateTopics",
    "DescribeConfigs",
    "AddPartitionsToTxn",
    "EndTxn",
    "SaslHandshake",  # also read by the listeners' SASL gate (kcoord.coordinator.net.sasl)
    "SaslAuthenticate",
    "DescribeAcls",  # the upstream's ACLs, for kcoord's own group APIs (coordinator/net/acl_source.py)
]

# The relayed admin and write APIs kcoord reads only to refuse what they would do to kcoord's own
# topics (kcoord.protocol.relay_messages; coordinator/net/relay/guard.py): never served, never sent.
RELAY_STEMS = [
    "DeleteTopics",
    "DeleteRecords",
    "CreatePartitions",
    "AlterConfigs",
    "IncrementalAlterConfigs",
    "AlterPartitionReassignments",
    "WriteTxnMarkers",
]

# Record type -> spec stem (kcoord.protocol.coordinator_records): the key spec is ``<stem>Key``,
# the value spec ``<stem>Value``.
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


def message_specs() -> list[str]:
    return [*(stem + kind for stem in MESSAGE_STEMS for kind in ("Request", "Response")), *MESSAGE_EXTRAS]


def storage_specs() -> list[str]:
    return [stem + kind for stem in STORAGE_STEMS for kind in ("Request", "Response")]


def relay_specs() -> list[str]:
    return [stem + kind for stem in RELAY_STEMS for kind in ("Request", "Response")]


def record_specs() -> list[str]:
    return [stem + part for stem in RECORD_STEMS.values() for part in ("Key", "Value")]
