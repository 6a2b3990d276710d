# Typed stub of kcoord.protocol.coordinator_records: written by `python -m kcoord.protocol.stubgen` from protocol/schemas.
# Do not edit; tests/unit/test_stubs.py fails when it is stale.

import uuid
from typing import ClassVar

from .codegen import Message, Struct
from .schema import MessageSchema

RECORD_STEMS: dict[int, str]
CLASSES: dict[str, type[Message]]

class OffsetCommitKey(Message):
    """Kafka's OffsetCommitKey (protocol/schemas/OffsetCommitKey.json): versions 0."""

    SCHEMA: ClassVar[MessageSchema]
    group: str  # v0
    topic: str  # v0
    partition: int  # v0
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        group: str = "",
        topic: str = "",
        partition: int = 0,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> OffsetCommitKey: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[OffsetCommitKey, int]: ...

class OffsetCommitValue(Message):
    """Kafka's OffsetCommitValue (protocol/schemas/OffsetCommitValue.json): versions 0-4, flexible v4+."""

    SCHEMA: ClassVar[MessageSchema]
    offset: int  # v0+
    leader_epoch: int  # v3+
    metadata: str  # v0+
    commit_timestamp: int  # v0+
    expire_timestamp: int  # v1
    topic_id: uuid.UUID  # v4+, tag 0 v4+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        offset: int = 0,
        leader_epoch: int = -1,
        metadata: str = "",
        commit_timestamp: int = 0,
        expire_timestamp: int = -1,
        topic_id: uuid.UUID = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> OffsetCommitValue: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[OffsetCommitValue, int]: ...

class GroupMetadataKey(Message):
    """Kafka's GroupMetadataKey (protocol/schemas/GroupMetadataKey.json): versions 0."""

    SCHEMA: ClassVar[MessageSchema]
    group: str  # v0
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(self, group: str = "", unknown_tagged: list[tuple[int, bytes]] | None = None) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> GroupMetadataKey: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[GroupMetadataKey, int]: ...

class GroupMetadataValue(Message):
    """Kafka's GroupMetadataValue (protocol/schemas/GroupMetadataValue.json): versions 0-4, flexible v4+."""

    class MemberMetadata(Struct):
        member_id: str  # v0+
        group_instance_id: str | None  # v3+, nullable v3+
        client_id: str  # v0+
        client_host: str  # v0+
        rebalance_timeout: int  # v1+
        session_timeout: int  # v0+
        subscription: bytes  # v0+
        assignment: bytes  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            member_id: str = "",
            group_instance_id: str | None = None,
            client_id: str = "",
            client_host: str = "",
            rebalance_timeout: int = -1,
            session_timeout: int = 0,
            subscription: bytes = b"",
            assignment: bytes = b"",
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    protocol_type: str  # v0+
    generation: int  # v0+
    protocol: str | None  # v0+, nullable v0+
    leader: str | None  # v0+, nullable v0+
    current_state_timestamp: int  # v2+
    members: list[GroupMetadataValue.MemberMetadata]  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        protocol_type: str = "",
        generation: int = 0,
        protocol: str | None = "",
        leader: str | None = "",
        current_state_timestamp: int = -1,
        members: list[GroupMetadataValue.MemberMetadata] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> GroupMetadataValue: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[GroupMetadataValue, int]: ...

class ConsumerGroupMetadataKey(Message):
    """Kafka's ConsumerGroupMetadataKey (protocol/schemas/ConsumerGroupMetadataKey.json): versions 0."""

    SCHEMA: ClassVar[MessageSchema]
    group_id: str  # v0
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(self, group_id: str = "", unknown_tagged: list[tuple[int, bytes]] | None = None) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> ConsumerGroupMetadataKey: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[ConsumerGroupMetadataKey, int]: ...

class ConsumerGroupMetadataValue(Message):
    """Kafka's ConsumerGroupMetadataValue (protocol/schemas/ConsumerGroupMetadataValue.json): versions 0, flexible v0+."""

    SCHEMA: ClassVar[MessageSchema]
    epoch: int  # v0+
    metadata_hash: int  # v0+, tag 0 v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        epoch: int = 0,
        metadata_hash: int = 0,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> ConsumerGroupMetadataValue: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[ConsumerGroupMetadataValue, int]: ...

class ConsumerGroupPartitionMetadataKey(Message):
    """Kafka's ConsumerGroupPartitionMetadataKey (protocol/schemas/ConsumerGroupPartitionMetadataKey.json): versions 0."""

    SCHEMA: ClassVar[MessageSchema]
    group_id: str  # v0
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(self, group_id: str = "", unknown_tagged: list[tuple[int, bytes]] | None = None) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> ConsumerGroupPartitionMetadataKey: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[ConsumerGroupPartitionMetadataKey, int]: ...

class ConsumerGroupPartitionMetadataValue(Message):
    """Kafka's ConsumerGroupPartitionMetadataValue (protocol/schemas/ConsumerGroupPartitionMetadataValue.json): versions 0, flexible v0+."""

    class TopicMetadata(Struct):
        topic_id: uuid.UUID  # v0+
        topic_name: str  # v0+
        num_partitions: int  # v0+
        partition_metadata: list[ConsumerGroupPartitionMetadataValue.PartitionMetadata]  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            topic_id: uuid.UUID = ...,
            topic_name: str = "",
            num_partitions: int = 0,
            partition_metadata: list[ConsumerGroupPartitionMetadataValue.PartitionMetadata] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class PartitionMetadata(Struct):
        partition: int  # v0+
        racks: list[str]  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            partition: int = 0,
            racks: list[str] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    topics: list[ConsumerGroupPartitionMetadataValue.TopicMetadata]  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        topics: list[ConsumerGroupPartitionMetadataValue.TopicMetadata] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> ConsumerGroupPartitionMetadataValue: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[ConsumerGroupPartitionMetadataValue, int]: ...

class ConsumerGroupMemberMetadataKey(Message):
    """Kafka's ConsumerGroupMemberMetadataKey (protocol/schemas/ConsumerGroupMemberMetadataKey.json): versions 0."""

    SCHEMA: ClassVar[MessageSchema]
    group_id: str  # v0
    member_id: str  # v0
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        group_id: str = "",
        member_id: str = "",
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> ConsumerGroupMemberMetadataKey: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[ConsumerGroupMemberMetadataKey, int]: ...

class ConsumerGroupMemberMetadataValue(Message):
    """Kafka's ConsumerGroupMemberMetadataValue (protocol/schemas/ConsumerGroupMemberMetadataValue.json): versions 0, flexible v0+."""

    class ClassicMemberMetadata(Struct):
        session_timeout_ms: int  # v0+
        supported_protocols: list[ConsumerGroupMemberMetadataValue.ClassicProtocol]  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            session_timeout_ms: int = 0,
            supported_protocols: list[ConsumerGroupMemberMetadataValue.ClassicProtocol] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class ClassicProtocol(Struct):
        name: str  # v0+
        metadata: bytes  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            name: str = "",
            metadata: bytes = b"",
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    instance_id: str | None  # v0+, nullable v0+
    rack_id: str | None  # v0+, nullable v0+
    client_id: str  # v0+
    client_host: str  # v0+
    subscribed_topic_names: list[str]  # v0+
    subscribed_topic_regex: str | None  # v0+, nullable v0+
    rebalance_timeout_ms: int  # v0+
    server_assignor: str | None  # v0+, nullable v0+
    classic_member_metadata: ConsumerGroupMemberMetadataValue.ClassicMemberMetadata | None  # v0+, nullable v0+, tag 0 v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        instance_id: str | None = "",
        rack_id: str | None = "",
        client_id: str = "",
        client_host: str = "",
        subscribed_topic_names: list[str] = ...,
        subscribed_topic_regex: str | None = "",
        rebalance_timeout_ms: int = -1,
        server_assignor: str | None = "",
        classic_member_metadata: ConsumerGroupMemberMetadataValue.ClassicMemberMetadata | None = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> ConsumerGroupMemberMetadataValue: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[ConsumerGroupMemberMetadataValue, int]: ...

class ConsumerGroupTargetAssignmentMetadataKey(Message):
    """Kafka's ConsumerGroupTargetAssignmentMetadataKey (protocol/schemas/ConsumerGroupTargetAssignmentMetadataKey.json): versions 0."""

    SCHEMA: ClassVar[MessageSchema]
    group_id: str  # v0
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(self, group_id: str = "", unknown_tagged: list[tuple[int, bytes]] | None = None) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> ConsumerGroupTargetAssignmentMetadataKey: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[ConsumerGroupTargetAssignmentMetadataKey, int]: ...

class ConsumerGroupTargetAssignmentMetadataValue(Message):
    """Kafka's ConsumerGroupTargetAssignmentMetadataValue (protocol/schemas/ConsumerGroupTargetAssignmentMetadataValue.json): versions 0, flexible v0+."""

    SCHEMA: ClassVar[MessageSchema]
    assignment_epoch: int  # v0+
    assignment_timestamp: int  # v0+, tag 0 v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        assignment_epoch: int = 0,
        assignment_timestamp: int = 0,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> ConsumerGroupTargetAssignmentMetadataValue: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[ConsumerGroupTargetAssignmentMetadataValue, int]: ...

class ConsumerGroupTargetAssignmentMemberKey(Message):
    """Kafka's ConsumerGroupTargetAssignmentMemberKey (protocol/schemas/ConsumerGroupTargetAssignmentMemberKey.json): versions 0."""

    SCHEMA: ClassVar[MessageSchema]
    group_id: str  # v0
    member_id: str  # v0
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        group_id: str = "",
        member_id: str = "",
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> ConsumerGroupTargetAssignmentMemberKey: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[ConsumerGroupTargetAssignmentMemberKey, int]: ...

class ConsumerGroupTargetAssignmentMemberValue(Message):
    """Kafka's ConsumerGroupTargetAssignmentMemberValue (protocol/schemas/ConsumerGroupTargetAssignmentMemberValue.json): versions 0, flexible v0+."""

    class TopicPartition(Struct):
        topic_id: uuid.UUID  # v0+
        partitions: list[int]  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            topic_id: uuid.UUID = ...,
            partitions: list[int] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    topic_partitions: list[ConsumerGroupTargetAssignmentMemberValue.TopicPartition]  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        topic_partitions: list[ConsumerGroupTargetAssignmentMemberValue.TopicPartition] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> ConsumerGroupTargetAssignmentMemberValue: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[ConsumerGroupTargetAssignmentMemberValue, int]: ...

class ConsumerGroupCurrentMemberAssignmentKey(Message):
    """Kafka's ConsumerGroupCurrentMemberAssignmentKey (protocol/schemas/ConsumerGroupCurrentMemberAssignmentKey.json): versions 0."""

    SCHEMA: ClassVar[MessageSchema]
    group_id: str  # v0
    member_id: str  # v0
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        group_id: str = "",
        member_id: str = "",
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> ConsumerGroupCurrentMemberAssignmentKey: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[ConsumerGroupCurrentMemberAssignmentKey, int]: ...

class ConsumerGroupCurrentMemberAssignmentValue(Message):
    """Kafka's ConsumerGroupCurrentMemberAssignmentValue (protocol/schemas/ConsumerGroupCurrentMemberAssignmentValue.json): versions 0, flexible v0+."""

    class TopicPartitions(Struct):
        topic_id: uuid.UUID  # v0+
        partitions: list[int]  # v0+
        assignment_epochs: list[int] | None  # v0+, nullable v0+, tag 0 v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            topic_id: uuid.UUID = ...,
            partitions: list[int] = ...,
            assignment_epochs: list[int] | None = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    member_epoch: int  # v0+
    previous_member_epoch: int  # v0+
    state: int  # v0+
    assigned_partitions: list[ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions]  # v0+
    partitions_pending_revocation: list[ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions]  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        member_epoch: int = 0,
        previous_member_epoch: int = 0,
        state: int = 0,
        assigned_partitions: list[ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions] = ...,
        partitions_pending_revocation: list[ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> ConsumerGroupCurrentMemberAssignmentValue: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[ConsumerGroupCurrentMemberAssignmentValue, int]: ...

class ConsumerGroupRegularExpressionKey(Message):
    """Kafka's ConsumerGroupRegularExpressionKey (protocol/schemas/ConsumerGroupRegularExpressionKey.json): versions 0."""

    SCHEMA: ClassVar[MessageSchema]
    group_id: str  # v0
    regular_expression: str  # v0
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        group_id: str = "",
        regular_expression: str = "",
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> ConsumerGroupRegularExpressionKey: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[ConsumerGroupRegularExpressionKey, int]: ...

class ConsumerGroupRegularExpressionValue(Message):
    """Kafka's ConsumerGroupRegularExpressionValue (protocol/schemas/ConsumerGroupRegularExpressionValue.json): versions 0, flexible v0+."""

    SCHEMA: ClassVar[MessageSchema]
    topics: list[str]  # v0+
    version: int  # v0+
    timestamp: int  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        topics: list[str] = ...,
        version: int = 0,
        timestamp: int = 0,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> ConsumerGroupRegularExpressionValue: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[ConsumerGroupRegularExpressionValue, int]: ...
