# Typed stub of kcoord.protocol.messages: written by `python -m kcoord.protocol.stubgen` from protocol/schemas.
# Do not edit; tests/unit/test_stubs.py fails when it is stale.

import uuid
from enum import IntEnum
from typing import ClassVar

from .codegen import Message, Struct
from .schema import MessageSchema

class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    API_VERSIONS = 18
    DELETE_GROUPS = 42
    OFFSET_DELETE = 47
    ADD_OFFSETS_TO_TXN = 25
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_CLUSTER = 60
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69

_STEMS: list[str]
KCOORD_VERSIONS: dict[int, tuple[int, int]]
REQUESTS: dict[int, type[Message]]
RESPONSES: dict[int, type[Message]]
_by_name: dict[str, type[Message]]

def is_flexible(api_key: int, version: int) -> bool: ...

class ApiVersionsRequest(Message):
    """Kafka's ApiVersionsRequest (protocol/schemas/ApiVersionsRequest.json): versions 0-5, flexible v3+."""

    SCHEMA: ClassVar[MessageSchema]
    client_software_name: str  # v3+
    client_software_version: str  # v3+
    cluster_id: str | None  # v5+, nullable v5+
    node_id: int  # v5+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        client_software_name: str = "",
        client_software_version: str = "",
        cluster_id: str | None = None,
        node_id: int = -1,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> ApiVersionsRequest: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[ApiVersionsRequest, int]: ...

class ApiVersionsResponse(Message):
    """Kafka's ApiVersionsResponse (protocol/schemas/ApiVersionsResponse.json): versions 0-5, flexible v3+."""

    class ApiVersion(Struct):
        api_key: int  # v0+
        min_version: int  # v0+
        max_version: int  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            api_key: int = 0,
            min_version: int = 0,
            max_version: int = 0,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class SupportedFeatureKey(Struct):
        name: str  # v3+
        min_version: int  # v3+
        max_version: int  # v3+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            name: str = "",
            min_version: int = 0,
            max_version: int = 0,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class FinalizedFeatureKey(Struct):
        name: str  # v3+
        max_version_level: int  # v3+
        min_version_level: int  # v3+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            name: str = "",
            max_version_level: int = 0,
            min_version_level: int = 0,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    error_code: int  # v0+
    api_keys: list[ApiVersionsResponse.ApiVersion]  # v0+
    throttle_time_ms: int  # v1+
    supported_features: list[ApiVersionsResponse.SupportedFeatureKey]  # v3+, tag 0 v3+
    finalized_features_epoch: int  # v3+, tag 1 v3+
    finalized_features: list[ApiVersionsResponse.FinalizedFeatureKey]  # v3+, tag 2 v3+
    zk_migration_ready: bool  # v3+, tag 3 v3+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        error_code: int = 0,
        api_keys: list[ApiVersionsResponse.ApiVersion] = ...,
        throttle_time_ms: int = 0,
        supported_features: list[ApiVersionsResponse.SupportedFeatureKey] = ...,
        finalized_features_epoch: int = -1,
        finalized_features: list[ApiVersionsResponse.FinalizedFeatureKey] = ...,
        zk_migration_ready: bool = False,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> ApiVersionsResponse: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[ApiVersionsResponse, int]: ...

class MetadataRequest(Message):
    """Kafka's MetadataRequest (protocol/schemas/MetadataRequest.json): versions 0-13, flexible v9+."""

    class MetadataRequestTopic(Struct):
        topic_id: uuid.UUID  # v10+
        name: str | None  # v0+, nullable v10+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            topic_id: uuid.UUID = ...,
            name: str | None = "",
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    topics: list[MetadataRequest.MetadataRequestTopic] | None  # v0+, nullable v1+
    allow_auto_topic_creation: bool  # v4+
    include_cluster_authorized_operations: bool  # v8-10
    include_topic_authorized_operations: bool  # v8+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        topics: list[MetadataRequest.MetadataRequestTopic] | None = ...,
        allow_auto_topic_creation: bool = True,
        include_cluster_authorized_operations: bool = False,
        include_topic_authorized_operations: bool = False,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> MetadataRequest: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[MetadataRequest, int]: ...

class MetadataResponse(Message):
    """Kafka's MetadataResponse (protocol/schemas/MetadataResponse.json): versions 0-13, flexible v9+."""

    class MetadataResponseBroker(Struct):
        node_id: int  # v0+
        host: str  # v0+
        port: int  # v0+
        rack: str | None  # v1+, nullable v1+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            node_id: int = 0,
            host: str = "",
            port: int = 0,
            rack: str | None = None,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class MetadataResponseTopic(Struct):
        error_code: int  # v0+
        name: str | None  # v0+, nullable v12+
        topic_id: uuid.UUID  # v10+
        is_internal: bool  # v1+
        partitions: list[MetadataResponse.MetadataResponsePartition]  # v0+
        topic_authorized_operations: int  # v8+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            error_code: int = 0,
            name: str | None = "",
            topic_id: uuid.UUID = ...,
            is_internal: bool = False,
            partitions: list[MetadataResponse.MetadataResponsePartition] = ...,
            topic_authorized_operations: int = -2147483648,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class MetadataResponsePartition(Struct):
        error_code: int  # v0+
        partition_index: int  # v0+
        leader_id: int  # v0+
        leader_epoch: int  # v7+
        replica_nodes: list[int]  # v0+
        isr_nodes: list[int]  # v0+
        offline_replicas: list[int]  # v5+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            error_code: int = 0,
            partition_index: int = 0,
            leader_id: int = 0,
            leader_epoch: int = -1,
            replica_nodes: list[int] = ...,
            isr_nodes: list[int] = ...,
            offline_replicas: list[int] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    throttle_time_ms: int  # v3+
    brokers: list[MetadataResponse.MetadataResponseBroker]  # v0+
    cluster_id: str | None  # v2+, nullable v2+
    controller_id: int  # v1+
    topics: list[MetadataResponse.MetadataResponseTopic]  # v0+
    cluster_authorized_operations: int  # v8-10
    error_code: int  # v13+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        throttle_time_ms: int = 0,
        brokers: list[MetadataResponse.MetadataResponseBroker] = ...,
        cluster_id: str | None = None,
        controller_id: int = -1,
        topics: list[MetadataResponse.MetadataResponseTopic] = ...,
        cluster_authorized_operations: int = -2147483648,
        error_code: int = 0,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> MetadataResponse: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[MetadataResponse, int]: ...

class FindCoordinatorRequest(Message):
    """Kafka's FindCoordinatorRequest (protocol/schemas/FindCoordinatorRequest.json): versions 0-6, flexible v3+."""

    SCHEMA: ClassVar[MessageSchema]
    key: str  # v0-3
    key_type: int  # v1+
    coordinator_keys: list[str]  # v4+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        key: str = "",
        key_type: int = 0,
        coordinator_keys: list[str] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> FindCoordinatorRequest: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[FindCoordinatorRequest, int]: ...

class FindCoordinatorResponse(Message):
    """Kafka's FindCoordinatorResponse (protocol/schemas/FindCoordinatorResponse.json): versions 0-6, flexible v3+."""

    class Coordinator(Struct):
        key: str  # v4+
        node_id: int  # v4+
        host: str  # v4+
        port: int  # v4+
        error_code: int  # v4+
        error_message: str | None  # v4+, nullable v4+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            key: str = "",
            node_id: int = 0,
            host: str = "",
            port: int = 0,
            error_code: int = 0,
            error_message: str | None = "",
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    throttle_time_ms: int  # v1+
    error_code: int  # v0-3
    error_message: str | None  # v1-3, nullable v1-3
    node_id: int  # v0-3
    host: str  # v0-3
    port: int  # v0-3
    coordinators: list[FindCoordinatorResponse.Coordinator]  # v4+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        throttle_time_ms: int = 0,
        error_code: int = 0,
        error_message: str | None = "",
        node_id: int = 0,
        host: str = "",
        port: int = 0,
        coordinators: list[FindCoordinatorResponse.Coordinator] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> FindCoordinatorResponse: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[FindCoordinatorResponse, int]: ...

class JoinGroupRequest(Message):
    """Kafka's JoinGroupRequest (protocol/schemas/JoinGroupRequest.json): versions 0-9, flexible v6+."""

    class JoinGroupRequestProtocol(Struct):
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
    group_id: str  # v0+
    session_timeout_ms: int  # v0+
    rebalance_timeout_ms: int  # v1+
    member_id: str  # v0+
    group_instance_id: str | None  # v5+, nullable v5+
    protocol_type: str  # v0+
    protocols: list[JoinGroupRequest.JoinGroupRequestProtocol]  # v0+
    reason: str | None  # v8+, nullable v8+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        group_id: str = "",
        session_timeout_ms: int = 0,
        rebalance_timeout_ms: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
        protocol_type: str = "",
        protocols: list[JoinGroupRequest.JoinGroupRequestProtocol] = ...,
        reason: str | None = None,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> JoinGroupRequest: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[JoinGroupRequest, int]: ...

class JoinGroupResponse(Message):
    """Kafka's JoinGroupResponse (protocol/schemas/JoinGroupResponse.json): versions 0-9, flexible v6+."""

    class JoinGroupResponseMember(Struct):
        member_id: str  # v0+
        group_instance_id: str | None  # v5+, nullable v5+
        metadata: bytes  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            member_id: str = "",
            group_instance_id: str | None = None,
            metadata: bytes = b"",
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    throttle_time_ms: int  # v2+
    error_code: int  # v0+
    generation_id: int  # v0+
    protocol_type: str | None  # v7+, nullable v7+
    protocol_name: str | None  # v0+, nullable v7+
    leader: str  # v0+
    skip_assignment: bool  # v9+
    member_id: str  # v0+
    members: list[JoinGroupResponse.JoinGroupResponseMember]  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        throttle_time_ms: int = 0,
        error_code: int = 0,
        generation_id: int = -1,
        protocol_type: str | None = None,
        protocol_name: str | None = "",
        leader: str = "",
        skip_assignment: bool = False,
        member_id: str = "",
        members: list[JoinGroupResponse.JoinGroupResponseMember] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> JoinGroupResponse: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[JoinGroupResponse, int]: ...

class SyncGroupRequest(Message):
    """Kafka's SyncGroupRequest (protocol/schemas/SyncGroupRequest.json): versions 0-5, flexible v4+."""

    class SyncGroupRequestAssignment(Struct):
        member_id: str  # v0+
        assignment: bytes  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            member_id: str = "",
            assignment: bytes = b"",
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    group_id: str  # v0+
    generation_id: int  # v0+
    member_id: str  # v0+
    group_instance_id: str | None  # v3+, nullable v3+
    protocol_type: str | None  # v5+, nullable v5+
    protocol_name: str | None  # v5+, nullable v5+
    assignments: list[SyncGroupRequest.SyncGroupRequestAssignment]  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        group_id: str = "",
        generation_id: int = 0,
        member_id: str = "",
        group_instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        assignments: list[SyncGroupRequest.SyncGroupRequestAssignment] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> SyncGroupRequest: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[SyncGroupRequest, int]: ...

class SyncGroupResponse(Message):
    """Kafka's SyncGroupResponse (protocol/schemas/SyncGroupResponse.json): versions 0-5, flexible v4+."""

    SCHEMA: ClassVar[MessageSchema]
    throttle_time_ms: int  # v1+
    error_code: int  # v0+
    protocol_type: str | None  # v5+, nullable v5+
    protocol_name: str | None  # v5+, nullable v5+
    assignment: bytes  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        throttle_time_ms: int = 0,
        error_code: int = 0,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
        assignment: bytes = b"",
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> SyncGroupResponse: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[SyncGroupResponse, int]: ...

class HeartbeatRequest(Message):
    """Kafka's HeartbeatRequest (protocol/schemas/HeartbeatRequest.json): versions 0-4, flexible v4+."""

    SCHEMA: ClassVar[MessageSchema]
    group_id: str  # v0+
    generation_id: int  # v0+
    member_id: str  # v0+
    group_instance_id: str | None  # v3+, nullable v3+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        group_id: str = "",
        generation_id: int = 0,
        member_id: str = "",
        group_instance_id: str | None = None,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> HeartbeatRequest: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[HeartbeatRequest, int]: ...

class HeartbeatResponse(Message):
    """Kafka's HeartbeatResponse (protocol/schemas/HeartbeatResponse.json): versions 0-4, flexible v4+."""

    SCHEMA: ClassVar[MessageSchema]
    throttle_time_ms: int  # v1+
    error_code: int  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        throttle_time_ms: int = 0,
        error_code: int = 0,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> HeartbeatResponse: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[HeartbeatResponse, int]: ...

class LeaveGroupRequest(Message):
    """Kafka's LeaveGroupRequest (protocol/schemas/LeaveGroupRequest.json): versions 0-5, flexible v4+."""

    class MemberIdentity(Struct):
        member_id: str  # v3+
        group_instance_id: str | None  # v3+, nullable v3+
        reason: str | None  # v5+, nullable v5+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            member_id: str = "",
            group_instance_id: str | None = None,
            reason: str | None = None,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    group_id: str  # v0+
    member_id: str  # v0-2
    members: list[LeaveGroupRequest.MemberIdentity]  # v3+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        group_id: str = "",
        member_id: str = "",
        members: list[LeaveGroupRequest.MemberIdentity] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> LeaveGroupRequest: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[LeaveGroupRequest, int]: ...

class LeaveGroupResponse(Message):
    """Kafka's LeaveGroupResponse (protocol/schemas/LeaveGroupResponse.json): versions 0-5, flexible v4+."""

    class MemberResponse(Struct):
        member_id: str  # v3+
        group_instance_id: str | None  # v3+, nullable v3+
        error_code: int  # v3+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            member_id: str = "",
            group_instance_id: str | None = "",
            error_code: int = 0,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    throttle_time_ms: int  # v1+
    error_code: int  # v0+
    members: list[LeaveGroupResponse.MemberResponse]  # v3+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        throttle_time_ms: int = 0,
        error_code: int = 0,
        members: list[LeaveGroupResponse.MemberResponse] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> LeaveGroupResponse: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[LeaveGroupResponse, int]: ...

class OffsetCommitRequest(Message):
    """Kafka's OffsetCommitRequest (protocol/schemas/OffsetCommitRequest.json): versions 2-10, flexible v8+."""

    class OffsetCommitRequestTopic(Struct):
        name: str  # v0-9
        topic_id: uuid.UUID  # v10+
        partitions: list[OffsetCommitRequest.OffsetCommitRequestPartition]  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            name: str = "",
            topic_id: uuid.UUID = ...,
            partitions: list[OffsetCommitRequest.OffsetCommitRequestPartition] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class OffsetCommitRequestPartition(Struct):
        partition_index: int  # v0+
        committed_offset: int  # v0+
        committed_leader_epoch: int  # v6+
        committed_metadata: str | None  # v0+, nullable v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            partition_index: int = 0,
            committed_offset: int = 0,
            committed_leader_epoch: int = -1,
            committed_metadata: str | None = "",
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    group_id: str  # v0+
    generation_id_or_member_epoch: int  # v1+
    member_id: str  # v1+
    group_instance_id: str | None  # v7+, nullable v7+
    retention_time_ms: int  # v2-4
    topics: list[OffsetCommitRequest.OffsetCommitRequestTopic]  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        group_id: str = "",
        generation_id_or_member_epoch: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
        retention_time_ms: int = -1,
        topics: list[OffsetCommitRequest.OffsetCommitRequestTopic] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> OffsetCommitRequest: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[OffsetCommitRequest, int]: ...

class OffsetCommitResponse(Message):
    """Kafka's OffsetCommitResponse (protocol/schemas/OffsetCommitResponse.json): versions 2-10, flexible v8+."""

    class OffsetCommitResponseTopic(Struct):
        name: str  # v0-9
        topic_id: uuid.UUID  # v10+
        partitions: list[OffsetCommitResponse.OffsetCommitResponsePartition]  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            name: str = "",
            topic_id: uuid.UUID = ...,
            partitions: list[OffsetCommitResponse.OffsetCommitResponsePartition] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class OffsetCommitResponsePartition(Struct):
        partition_index: int  # v0+
        error_code: int  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            partition_index: int = 0,
            error_code: int = 0,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    throttle_time_ms: int  # v3+
    topics: list[OffsetCommitResponse.OffsetCommitResponseTopic]  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        throttle_time_ms: int = 0,
        topics: list[OffsetCommitResponse.OffsetCommitResponseTopic] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> OffsetCommitResponse: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[OffsetCommitResponse, int]: ...

class OffsetFetchRequest(Message):
    """Kafka's OffsetFetchRequest (protocol/schemas/OffsetFetchRequest.json): versions 1-10, flexible v6+."""

    class OffsetFetchRequestTopic(Struct):
        name: str  # v0-7
        partition_indexes: list[int]  # v0-7
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            name: str = "",
            partition_indexes: list[int] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class OffsetFetchRequestGroup(Struct):
        group_id: str  # v8+
        member_id: str | None  # v9+, nullable v9+
        member_epoch: int  # v9+
        topics: list[OffsetFetchRequest.OffsetFetchRequestTopics] | None  # v8+, nullable v8+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            group_id: str = "",
            member_id: str | None = None,
            member_epoch: int = -1,
            topics: list[OffsetFetchRequest.OffsetFetchRequestTopics] | None = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class OffsetFetchRequestTopics(Struct):
        name: str  # v8-9
        topic_id: uuid.UUID  # v10+
        partition_indexes: list[int]  # v8+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            name: str = "",
            topic_id: uuid.UUID = ...,
            partition_indexes: list[int] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    group_id: str  # v0-7
    topics: list[OffsetFetchRequest.OffsetFetchRequestTopic] | None  # v0-7, nullable v2-7
    groups: list[OffsetFetchRequest.OffsetFetchRequestGroup]  # v8+
    require_stable: bool  # v7+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        group_id: str = "",
        topics: list[OffsetFetchRequest.OffsetFetchRequestTopic] | None = ...,
        groups: list[OffsetFetchRequest.OffsetFetchRequestGroup] = ...,
        require_stable: bool = False,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> OffsetFetchRequest: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[OffsetFetchRequest, int]: ...

class OffsetFetchResponse(Message):
    """Kafka's OffsetFetchResponse (protocol/schemas/OffsetFetchResponse.json): versions 1-10, flexible v6+."""

    class OffsetFetchResponseTopic(Struct):
        name: str  # v0-7
        partitions: list[OffsetFetchResponse.OffsetFetchResponsePartition]  # v0-7
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            name: str = "",
            partitions: list[OffsetFetchResponse.OffsetFetchResponsePartition] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class OffsetFetchResponsePartition(Struct):
        partition_index: int  # v0-7
        committed_offset: int  # v0-7
        committed_leader_epoch: int  # v5-7
        metadata: str | None  # v0-7, nullable v0-7
        error_code: int  # v0-7
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            partition_index: int = 0,
            committed_offset: int = 0,
            committed_leader_epoch: int = -1,
            metadata: str | None = "",
            error_code: int = 0,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class OffsetFetchResponseGroup(Struct):
        group_id: str  # v8+
        topics: list[OffsetFetchResponse.OffsetFetchResponseTopics]  # v8+
        error_code: int  # v8+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            group_id: str = "",
            topics: list[OffsetFetchResponse.OffsetFetchResponseTopics] = ...,
            error_code: int = 0,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class OffsetFetchResponseTopics(Struct):
        name: str  # v8-9
        topic_id: uuid.UUID  # v10+
        partitions: list[OffsetFetchResponse.OffsetFetchResponsePartitions]  # v8+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            name: str = "",
            topic_id: uuid.UUID = ...,
            partitions: list[OffsetFetchResponse.OffsetFetchResponsePartitions] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class OffsetFetchResponsePartitions(Struct):
        partition_index: int  # v8+
        committed_offset: int  # v8+
        committed_leader_epoch: int  # v8+
        metadata: str | None  # v8+, nullable v8+
        error_code: int  # v8+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            partition_index: int = 0,
            committed_offset: int = 0,
            committed_leader_epoch: int = -1,
            metadata: str | None = "",
            error_code: int = 0,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    throttle_time_ms: int  # v3+
    topics: list[OffsetFetchResponse.OffsetFetchResponseTopic]  # v0-7
    error_code: int  # v2-7
    groups: list[OffsetFetchResponse.OffsetFetchResponseGroup]  # v8+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        throttle_time_ms: int = 0,
        topics: list[OffsetFetchResponse.OffsetFetchResponseTopic] = ...,
        error_code: int = 0,
        groups: list[OffsetFetchResponse.OffsetFetchResponseGroup] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> OffsetFetchResponse: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[OffsetFetchResponse, int]: ...

class DescribeGroupsRequest(Message):
    """Kafka's DescribeGroupsRequest (protocol/schemas/DescribeGroupsRequest.json): versions 0-6, flexible v5+."""

    SCHEMA: ClassVar[MessageSchema]
    groups: list[str]  # v0+
    include_authorized_operations: bool  # v3+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        groups: list[str] = ...,
        include_authorized_operations: bool = False,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> DescribeGroupsRequest: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[DescribeGroupsRequest, int]: ...

class DescribeGroupsResponse(Message):
    """Kafka's DescribeGroupsResponse (protocol/schemas/DescribeGroupsResponse.json): versions 0-6, flexible v5+."""

    class DescribedGroup(Struct):
        error_code: int  # v0+
        error_message: str | None  # v6+, nullable v6+
        group_id: str  # v0+
        group_state: str  # v0+
        protocol_type: str  # v0+
        protocol_data: str  # v0+
        members: list[DescribeGroupsResponse.DescribedGroupMember]  # v0+
        authorized_operations: int  # v3+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            error_code: int = 0,
            error_message: str | None = None,
            group_id: str = "",
            group_state: str = "",
            protocol_type: str = "",
            protocol_data: str = "",
            members: list[DescribeGroupsResponse.DescribedGroupMember] = ...,
            authorized_operations: int = -2147483648,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class DescribedGroupMember(Struct):
        member_id: str  # v0+
        group_instance_id: str | None  # v4+, nullable v4+
        client_id: str  # v0+
        client_host: str  # v0+
        member_metadata: bytes  # v0+
        member_assignment: bytes  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            member_id: str = "",
            group_instance_id: str | None = None,
            client_id: str = "",
            client_host: str = "",
            member_metadata: bytes = b"",
            member_assignment: bytes = b"",
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    throttle_time_ms: int  # v1+
    groups: list[DescribeGroupsResponse.DescribedGroup]  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        throttle_time_ms: int = 0,
        groups: list[DescribeGroupsResponse.DescribedGroup] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> DescribeGroupsResponse: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[DescribeGroupsResponse, int]: ...

class ListGroupsRequest(Message):
    """Kafka's ListGroupsRequest (protocol/schemas/ListGroupsRequest.json): versions 0-5, flexible v3+."""

    SCHEMA: ClassVar[MessageSchema]
    states_filter: list[str]  # v4+
    types_filter: list[str]  # v5+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        states_filter: list[str] = ...,
        types_filter: list[str] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> ListGroupsRequest: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[ListGroupsRequest, int]: ...

class ListGroupsResponse(Message):
    """Kafka's ListGroupsResponse (protocol/schemas/ListGroupsResponse.json): versions 0-5, flexible v3+."""

    class ListedGroup(Struct):
        group_id: str  # v0+
        protocol_type: str  # v0+
        group_state: str  # v4+
        group_type: str  # v5+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            group_id: str = "",
            protocol_type: str = "",
            group_state: str = "",
            group_type: str = "",
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    throttle_time_ms: int  # v1+
    error_code: int  # v0+
    groups: list[ListGroupsResponse.ListedGroup]  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        throttle_time_ms: int = 0,
        error_code: int = 0,
        groups: list[ListGroupsResponse.ListedGroup] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> ListGroupsResponse: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[ListGroupsResponse, int]: ...

class DeleteGroupsRequest(Message):
    """Kafka's DeleteGroupsRequest (protocol/schemas/DeleteGroupsRequest.json): versions 0-3, flexible v2+."""

    SCHEMA: ClassVar[MessageSchema]
    groups_names: list[str]  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        groups_names: list[str] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> DeleteGroupsRequest: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[DeleteGroupsRequest, int]: ...

class DeleteGroupsResponse(Message):
    """Kafka's DeleteGroupsResponse (protocol/schemas/DeleteGroupsResponse.json): versions 0-3, flexible v2+."""

    class DeletableGroupResult(Struct):
        group_id: str  # v0+
        error_code: int  # v0+
        error_message: str | None  # v3+, nullable v3+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            group_id: str = "",
            error_code: int = 0,
            error_message: str | None = None,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    throttle_time_ms: int  # v0+
    results: list[DeleteGroupsResponse.DeletableGroupResult]  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        throttle_time_ms: int = 0,
        results: list[DeleteGroupsResponse.DeletableGroupResult] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> DeleteGroupsResponse: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[DeleteGroupsResponse, int]: ...

class OffsetDeleteRequest(Message):
    """Kafka's OffsetDeleteRequest (protocol/schemas/OffsetDeleteRequest.json): versions 0."""

    class OffsetDeleteRequestTopic(Struct):
        name: str  # v0+
        partitions: list[OffsetDeleteRequest.OffsetDeleteRequestPartition]  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            name: str = "",
            partitions: list[OffsetDeleteRequest.OffsetDeleteRequestPartition] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class OffsetDeleteRequestPartition(Struct):
        partition_index: int  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            partition_index: int = 0,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    group_id: str  # v0+
    topics: list[OffsetDeleteRequest.OffsetDeleteRequestTopic]  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        group_id: str = "",
        topics: list[OffsetDeleteRequest.OffsetDeleteRequestTopic] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> OffsetDeleteRequest: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[OffsetDeleteRequest, int]: ...

class OffsetDeleteResponse(Message):
    """Kafka's OffsetDeleteResponse (protocol/schemas/OffsetDeleteResponse.json): versions 0."""

    class OffsetDeleteResponseTopic(Struct):
        name: str  # v0+
        partitions: list[OffsetDeleteResponse.OffsetDeleteResponsePartition]  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            name: str = "",
            partitions: list[OffsetDeleteResponse.OffsetDeleteResponsePartition] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class OffsetDeleteResponsePartition(Struct):
        partition_index: int  # v0+
        error_code: int  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            partition_index: int = 0,
            error_code: int = 0,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    error_code: int  # v0+
    throttle_time_ms: int  # v0+
    topics: list[OffsetDeleteResponse.OffsetDeleteResponseTopic]  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        error_code: int = 0,
        throttle_time_ms: int = 0,
        topics: list[OffsetDeleteResponse.OffsetDeleteResponseTopic] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> OffsetDeleteResponse: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[OffsetDeleteResponse, int]: ...

class TxnOffsetCommitRequest(Message):
    """Kafka's TxnOffsetCommitRequest (protocol/schemas/TxnOffsetCommitRequest.json): versions 0-6, flexible v3+."""

    class TxnOffsetCommitRequestTopic(Struct):
        name: str  # v0-5
        topic_id: uuid.UUID  # v6+
        partitions: list[TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition]  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            name: str = "",
            topic_id: uuid.UUID = ...,
            partitions: list[TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class TxnOffsetCommitRequestPartition(Struct):
        partition_index: int  # v0+
        committed_offset: int  # v0+
        committed_leader_epoch: int  # v2+
        committed_metadata: str | None  # v0+, nullable v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            partition_index: int = 0,
            committed_offset: int = 0,
            committed_leader_epoch: int = -1,
            committed_metadata: str | None = "",
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    transactional_id: str  # v0+
    group_id: str  # v0+
    producer_id: int  # v0+
    producer_epoch: int  # v0+
    generation_id_or_member_epoch: int  # v3+
    member_id: str  # v3+
    group_instance_id: str | None  # v3+, nullable v3+
    topics: list[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic]  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        transactional_id: str = "",
        group_id: str = "",
        producer_id: int = 0,
        producer_epoch: int = 0,
        generation_id_or_member_epoch: int = -1,
        member_id: str = "",
        group_instance_id: str | None = None,
        topics: list[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> TxnOffsetCommitRequest: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[TxnOffsetCommitRequest, int]: ...

class TxnOffsetCommitResponse(Message):
    """Kafka's TxnOffsetCommitResponse (protocol/schemas/TxnOffsetCommitResponse.json): versions 0-6, flexible v3+."""

    class TxnOffsetCommitResponseTopic(Struct):
        name: str  # v0-5
        topic_id: uuid.UUID  # v6+
        partitions: list[TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition]  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            name: str = "",
            topic_id: uuid.UUID = ...,
            partitions: list[TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class TxnOffsetCommitResponsePartition(Struct):
        partition_index: int  # v0+
        error_code: int  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            partition_index: int = 0,
            error_code: int = 0,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    throttle_time_ms: int  # v0+
    topics: list[TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic]  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        throttle_time_ms: int = 0,
        topics: list[TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> TxnOffsetCommitResponse: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[TxnOffsetCommitResponse, int]: ...

class AddOffsetsToTxnRequest(Message):
    """Kafka's AddOffsetsToTxnRequest (protocol/schemas/AddOffsetsToTxnRequest.json): versions 0-4, flexible v3+."""

    SCHEMA: ClassVar[MessageSchema]
    transactional_id: str  # v0+
    producer_id: int  # v0+
    producer_epoch: int  # v0+
    group_id: str  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        transactional_id: str = "",
        producer_id: int = 0,
        producer_epoch: int = 0,
        group_id: str = "",
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> AddOffsetsToTxnRequest: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[AddOffsetsToTxnRequest, int]: ...

class AddOffsetsToTxnResponse(Message):
    """Kafka's AddOffsetsToTxnResponse (protocol/schemas/AddOffsetsToTxnResponse.json): versions 0-4, flexible v3+."""

    SCHEMA: ClassVar[MessageSchema]
    throttle_time_ms: int  # v0+
    error_code: int  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        throttle_time_ms: int = 0,
        error_code: int = 0,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> AddOffsetsToTxnResponse: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[AddOffsetsToTxnResponse, int]: ...

class DescribeClusterRequest(Message):
    """Kafka's DescribeClusterRequest (protocol/schemas/DescribeClusterRequest.json): versions 0-2, flexible v0+."""

    SCHEMA: ClassVar[MessageSchema]
    include_cluster_authorized_operations: bool  # v0+
    endpoint_type: int  # v1+
    include_fenced_brokers: bool  # v2+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        include_cluster_authorized_operations: bool = False,
        endpoint_type: int = 1,
        include_fenced_brokers: bool = False,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> DescribeClusterRequest: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[DescribeClusterRequest, int]: ...

class DescribeClusterResponse(Message):
    """Kafka's DescribeClusterResponse (protocol/schemas/DescribeClusterResponse.json): versions 0-2, flexible v0+."""

    class DescribeClusterBroker(Struct):
        broker_id: int  # v0+
        host: str  # v0+
        port: int  # v0+
        rack: str | None  # v0+, nullable v0+
        is_fenced: bool  # v2+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            broker_id: int = 0,
            host: str = "",
            port: int = 0,
            rack: str | None = None,
            is_fenced: bool = False,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    throttle_time_ms: int  # v0+
    error_code: int  # v0+
    error_message: str | None  # v0+, nullable v0+
    endpoint_type: int  # v1+
    cluster_id: str  # v0+
    controller_id: int  # v0+
    brokers: list[DescribeClusterResponse.DescribeClusterBroker]  # v0+
    cluster_authorized_operations: int  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        throttle_time_ms: int = 0,
        error_code: int = 0,
        error_message: str | None = None,
        endpoint_type: int = 1,
        cluster_id: str = "",
        controller_id: int = -1,
        brokers: list[DescribeClusterResponse.DescribeClusterBroker] = ...,
        cluster_authorized_operations: int = -2147483648,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> DescribeClusterResponse: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[DescribeClusterResponse, int]: ...

class ProduceRequest(Message):
    """Kafka's ProduceRequest (protocol/schemas/ProduceRequest.json): versions 3-13, flexible v9+."""

    class TopicProduceData(Struct):
        name: str  # v0-12
        topic_id: uuid.UUID  # v13+
        partition_data: list[ProduceRequest.PartitionProduceData]  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            name: str = "",
            topic_id: uuid.UUID = ...,
            partition_data: list[ProduceRequest.PartitionProduceData] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class PartitionProduceData(Struct):
        index: int  # v0+
        records: bytes | None  # v0+, nullable v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            index: int = 0,
            records: bytes | None = None,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    transactional_id: str | None  # v3+, nullable v3+
    acks: int  # v0+
    timeout_ms: int  # v0+
    topic_data: list[ProduceRequest.TopicProduceData]  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        transactional_id: str | None = None,
        acks: int = 0,
        timeout_ms: int = 0,
        topic_data: list[ProduceRequest.TopicProduceData] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> ProduceRequest: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[ProduceRequest, int]: ...

class ProduceResponse(Message):
    """Kafka's ProduceResponse (protocol/schemas/ProduceResponse.json): versions 3-13, flexible v9+."""

    class TopicProduceResponse(Struct):
        name: str  # v0-12
        topic_id: uuid.UUID  # v13+
        partition_responses: list[ProduceResponse.PartitionProduceResponse]  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            name: str = "",
            topic_id: uuid.UUID = ...,
            partition_responses: list[ProduceResponse.PartitionProduceResponse] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class PartitionProduceResponse(Struct):
        index: int  # v0+
        error_code: int  # v0+
        base_offset: int  # v0+
        log_append_time_ms: int  # v2+
        log_start_offset: int  # v5+
        record_errors: list[ProduceResponse.BatchIndexAndErrorMessage]  # v8+
        error_message: str | None  # v8+, nullable v8+
        current_leader: ProduceResponse.LeaderIdAndEpoch  # v10+, tag 0 v10+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            index: int = 0,
            error_code: int = 0,
            base_offset: int = 0,
            log_append_time_ms: int = -1,
            log_start_offset: int = -1,
            record_errors: list[ProduceResponse.BatchIndexAndErrorMessage] = ...,
            error_message: str | None = None,
            current_leader: ProduceResponse.LeaderIdAndEpoch = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class BatchIndexAndErrorMessage(Struct):
        batch_index: int  # v8+
        batch_index_error_message: str | None  # v8+, nullable v8+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            batch_index: int = 0,
            batch_index_error_message: str | None = None,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class LeaderIdAndEpoch(Struct):
        leader_id: int  # v10+
        leader_epoch: int  # v10+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            leader_id: int = -1,
            leader_epoch: int = -1,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class NodeEndpoint(Struct):
        node_id: int  # v10+
        host: str  # v10+
        port: int  # v10+
        rack: str | None  # v10+, nullable v10+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            node_id: int = 0,
            host: str = "",
            port: int = 0,
            rack: str | None = None,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    responses: list[ProduceResponse.TopicProduceResponse]  # v0+
    throttle_time_ms: int  # v1+
    node_endpoints: list[ProduceResponse.NodeEndpoint]  # v10+, tag 0 v10+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        responses: list[ProduceResponse.TopicProduceResponse] = ...,
        throttle_time_ms: int = 0,
        node_endpoints: list[ProduceResponse.NodeEndpoint] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> ProduceResponse: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[ProduceResponse, int]: ...

class FetchRequest(Message):
    """Kafka's FetchRequest (protocol/schemas/FetchRequest.json): versions 4-18, flexible v12+."""

    class ReplicaState(Struct):
        replica_id: int  # v15+
        replica_epoch: int  # v15+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            replica_id: int = -1,
            replica_epoch: int = -1,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class FetchTopic(Struct):
        topic: str  # v0-12
        topic_id: uuid.UUID  # v13+
        partitions: list[FetchRequest.FetchPartition]  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            topic: str = "",
            topic_id: uuid.UUID = ...,
            partitions: list[FetchRequest.FetchPartition] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class FetchPartition(Struct):
        partition: int  # v0+
        current_leader_epoch: int  # v9+
        fetch_offset: int  # v0+
        last_fetched_epoch: int  # v12+
        log_start_offset: int  # v5+
        partition_max_bytes: int  # v0+
        replica_directory_id: uuid.UUID  # v17+, tag 0 v17+
        high_watermark: int  # v18+, tag 1 v18+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            partition: int = 0,
            current_leader_epoch: int = -1,
            fetch_offset: int = 0,
            last_fetched_epoch: int = -1,
            log_start_offset: int = -1,
            partition_max_bytes: int = 0,
            replica_directory_id: uuid.UUID = ...,
            high_watermark: int = 9223372036854775807,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class ForgottenTopic(Struct):
        topic: str  # v7-12
        topic_id: uuid.UUID  # v13+
        partitions: list[int]  # v7+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            topic: str = "",
            topic_id: uuid.UUID = ...,
            partitions: list[int] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    cluster_id: str | None  # v12+, nullable v12+, tag 0 v12+
    replica_id: int  # v0-14
    replica_state: FetchRequest.ReplicaState  # v15+, tag 1 v15+
    max_wait_ms: int  # v0+
    min_bytes: int  # v0+
    max_bytes: int  # v3+
    isolation_level: int  # v4+
    session_id: int  # v7+
    session_epoch: int  # v7+
    topics: list[FetchRequest.FetchTopic]  # v0+
    forgotten_topics_data: list[FetchRequest.ForgottenTopic]  # v7+
    rack_id: str  # v11+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        cluster_id: str | None = None,
        replica_id: int = -1,
        replica_state: FetchRequest.ReplicaState = ...,
        max_wait_ms: int = 0,
        min_bytes: int = 0,
        max_bytes: int = 2147483647,
        isolation_level: int = 0,
        session_id: int = 0,
        session_epoch: int = -1,
        topics: list[FetchRequest.FetchTopic] = ...,
        forgotten_topics_data: list[FetchRequest.ForgottenTopic] = ...,
        rack_id: str = "",
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> FetchRequest: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[FetchRequest, int]: ...

class FetchResponse(Message):
    """Kafka's FetchResponse (protocol/schemas/FetchResponse.json): versions 4-18, flexible v12+."""

    class FetchableTopicResponse(Struct):
        topic: str  # v0-12
        topic_id: uuid.UUID  # v13+
        partitions: list[FetchResponse.PartitionData]  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            topic: str = "",
            topic_id: uuid.UUID = ...,
            partitions: list[FetchResponse.PartitionData] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class PartitionData(Struct):
        partition_index: int  # v0+
        error_code: int  # v0+
        high_watermark: int  # v0+
        last_stable_offset: int  # v4+
        log_start_offset: int  # v5+
        diverging_epoch: FetchResponse.EpochEndOffset  # v12+, tag 0 v12+
        current_leader: FetchResponse.LeaderIdAndEpoch  # v12+, tag 1 v12+
        snapshot_id: FetchResponse.SnapshotId  # v12+, tag 2 v12+
        aborted_transactions: list[FetchResponse.AbortedTransaction] | None  # v4+, nullable v4+
        preferred_read_replica: int  # v11+
        records: bytes | None  # v0+, nullable v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            partition_index: int = 0,
            error_code: int = 0,
            high_watermark: int = 0,
            last_stable_offset: int = -1,
            log_start_offset: int = -1,
            diverging_epoch: FetchResponse.EpochEndOffset = ...,
            current_leader: FetchResponse.LeaderIdAndEpoch = ...,
            snapshot_id: FetchResponse.SnapshotId = ...,
            aborted_transactions: list[FetchResponse.AbortedTransaction] | None = ...,
            preferred_read_replica: int = -1,
            records: bytes | None = None,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class EpochEndOffset(Struct):
        epoch: int  # v12+
        end_offset: int  # v12+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            epoch: int = -1,
            end_offset: int = -1,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class LeaderIdAndEpoch(Struct):
        leader_id: int  # v12+
        leader_epoch: int  # v12+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            leader_id: int = -1,
            leader_epoch: int = -1,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class SnapshotId(Struct):
        end_offset: int  # v0+
        epoch: int  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            end_offset: int = -1,
            epoch: int = -1,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class AbortedTransaction(Struct):
        producer_id: int  # v4+
        first_offset: int  # v4+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            producer_id: int = 0,
            first_offset: int = 0,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class NodeEndpoint(Struct):
        node_id: int  # v16+
        host: str  # v16+
        port: int  # v16+
        rack: str | None  # v16+, nullable v16+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            node_id: int = 0,
            host: str = "",
            port: int = 0,
            rack: str | None = None,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    throttle_time_ms: int  # v1+
    error_code: int  # v7+
    session_id: int  # v7+
    responses: list[FetchResponse.FetchableTopicResponse]  # v0+
    node_endpoints: list[FetchResponse.NodeEndpoint]  # v16+, tag 0 v16+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        throttle_time_ms: int = 0,
        error_code: int = 0,
        session_id: int = 0,
        responses: list[FetchResponse.FetchableTopicResponse] = ...,
        node_endpoints: list[FetchResponse.NodeEndpoint] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> FetchResponse: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[FetchResponse, int]: ...

class ConsumerGroupHeartbeatRequest(Message):
    """Kafka's ConsumerGroupHeartbeatRequest (protocol/schemas/ConsumerGroupHeartbeatRequest.json): versions 0-1, flexible v0+."""

    class TopicPartitions(Struct):
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
    group_id: str  # v0+
    member_id: str  # v0+
    member_epoch: int  # v0+
    instance_id: str | None  # v0+, nullable v0+
    rack_id: str | None  # v0+, nullable v0+
    rebalance_timeout_ms: int  # v0+
    subscribed_topic_names: list[str] | None  # v0+, nullable v0+
    subscribed_topic_regex: str | None  # v1+, nullable v1+
    server_assignor: str | None  # v0+, nullable v0+
    topic_partitions: list[ConsumerGroupHeartbeatRequest.TopicPartitions] | None  # v0+, nullable v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        group_id: str = "",
        member_id: str = "",
        member_epoch: int = 0,
        instance_id: str | None = None,
        rack_id: str | None = None,
        rebalance_timeout_ms: int = -1,
        subscribed_topic_names: list[str] | None = None,
        subscribed_topic_regex: str | None = None,
        server_assignor: str | None = None,
        topic_partitions: list[ConsumerGroupHeartbeatRequest.TopicPartitions] | None = None,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> ConsumerGroupHeartbeatRequest: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[ConsumerGroupHeartbeatRequest, int]: ...

class ConsumerGroupHeartbeatResponse(Message):
    """Kafka's ConsumerGroupHeartbeatResponse (protocol/schemas/ConsumerGroupHeartbeatResponse.json): versions 0-1, flexible v0+."""

    class Assignment(Struct):
        topic_partitions: list[ConsumerGroupHeartbeatResponse.TopicPartitions]  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            topic_partitions: list[ConsumerGroupHeartbeatResponse.TopicPartitions] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class TopicPartitions(Struct):
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
    throttle_time_ms: int  # v0+
    error_code: int  # v0+
    error_message: str | None  # v0+, nullable v0+
    member_id: str | None  # v0+, nullable v0+
    member_epoch: int  # v0+
    heartbeat_interval_ms: int  # v0+
    assignment: ConsumerGroupHeartbeatResponse.Assignment | None  # v0+, nullable v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        throttle_time_ms: int = 0,
        error_code: int = 0,
        error_message: str | None = None,
        member_id: str | None = None,
        member_epoch: int = 0,
        heartbeat_interval_ms: int = 0,
        assignment: ConsumerGroupHeartbeatResponse.Assignment | None = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> ConsumerGroupHeartbeatResponse: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[ConsumerGroupHeartbeatResponse, int]: ...

class ConsumerGroupDescribeRequest(Message):
    """Kafka's ConsumerGroupDescribeRequest (protocol/schemas/ConsumerGroupDescribeRequest.json): versions 0-1, flexible v0+."""

    SCHEMA: ClassVar[MessageSchema]
    group_ids: list[str]  # v0+
    include_authorized_operations: bool  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        group_ids: list[str] = ...,
        include_authorized_operations: bool = False,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> ConsumerGroupDescribeRequest: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[ConsumerGroupDescribeRequest, int]: ...

class ConsumerGroupDescribeResponse(Message):
    """Kafka's ConsumerGroupDescribeResponse (protocol/schemas/ConsumerGroupDescribeResponse.json): versions 0-1, flexible v0+."""

    class DescribedGroup(Struct):
        error_code: int  # v0+
        error_message: str | None  # v0+, nullable v0+
        group_id: str  # v0+
        group_state: str  # v0+
        group_epoch: int  # v0+
        assignment_epoch: int  # v0+
        assignor_name: str  # v0+
        members: list[ConsumerGroupDescribeResponse.Member]  # v0+
        authorized_operations: int  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            error_code: int = 0,
            error_message: str | None = None,
            group_id: str = "",
            group_state: str = "",
            group_epoch: int = 0,
            assignment_epoch: int = 0,
            assignor_name: str = "",
            members: list[ConsumerGroupDescribeResponse.Member] = ...,
            authorized_operations: int = -2147483648,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class Member(Struct):
        member_id: str  # v0+
        instance_id: str | None  # v0+, nullable v0+
        rack_id: str | None  # v0+, nullable v0+
        member_epoch: int  # v0+
        client_id: str  # v0+
        client_host: str  # v0+
        subscribed_topic_names: list[str]  # v0+
        subscribed_topic_regex: str | None  # v0+, nullable v0+
        assignment: ConsumerGroupDescribeResponse.Assignment  # v0+
        target_assignment: ConsumerGroupDescribeResponse.Assignment  # v0+
        member_type: int  # v1+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            member_id: str = "",
            instance_id: str | None = None,
            rack_id: str | None = None,
            member_epoch: int = 0,
            client_id: str = "",
            client_host: str = "",
            subscribed_topic_names: list[str] = ...,
            subscribed_topic_regex: str | None = None,
            assignment: ConsumerGroupDescribeResponse.Assignment = ...,
            target_assignment: ConsumerGroupDescribeResponse.Assignment = ...,
            member_type: int = -1,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class Assignment(Struct):
        topic_partitions: list[ConsumerGroupDescribeResponse.TopicPartitions]  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            topic_partitions: list[ConsumerGroupDescribeResponse.TopicPartitions] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class TopicPartitions(Struct):
        topic_id: uuid.UUID  # v0+
        topic_name: str  # v0+
        partitions: list[int]  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            topic_id: uuid.UUID = ...,
            topic_name: str = "",
            partitions: list[int] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    throttle_time_ms: int  # v0+
    groups: list[ConsumerGroupDescribeResponse.DescribedGroup]  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        throttle_time_ms: int = 0,
        groups: list[ConsumerGroupDescribeResponse.DescribedGroup] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> ConsumerGroupDescribeResponse: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[ConsumerGroupDescribeResponse, int]: ...

class RequestHeader(Message):
    """Kafka's RequestHeader (protocol/schemas/RequestHeader.json): versions 1-2, flexible v2+."""

    SCHEMA: ClassVar[MessageSchema]
    request_api_key: int  # v0+
    request_api_version: int  # v0+
    correlation_id: int  # v0+
    client_id: str | None  # v1+, nullable v1+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        request_api_key: int = 0,
        request_api_version: int = 0,
        correlation_id: int = 0,
        client_id: str | None = "",
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> RequestHeader: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[RequestHeader, int]: ...

class ResponseHeader(Message):
    """Kafka's ResponseHeader (protocol/schemas/ResponseHeader.json): versions 0-1, flexible v1+."""

    SCHEMA: ClassVar[MessageSchema]
    correlation_id: int  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        correlation_id: int = 0,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> ResponseHeader: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[ResponseHeader, int]: ...

class ConsumerProtocolSubscription(Message):
    """Kafka's ConsumerProtocolSubscription (protocol/schemas/ConsumerProtocolSubscription.json): versions 0-3."""

    class TopicPartition(Struct):
        topic: str  # v1+
        partitions: list[int]  # v1+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            topic: str = "",
            partitions: list[int] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    topics: list[str]  # v0+
    user_data: bytes | None  # v0+, nullable v0+
    owned_partitions: list[ConsumerProtocolSubscription.TopicPartition]  # v1+
    generation_id: int  # v2+
    rack_id: str | None  # v3+, nullable v3+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        topics: list[str] = ...,
        user_data: bytes | None = None,
        owned_partitions: list[ConsumerProtocolSubscription.TopicPartition] = ...,
        generation_id: int = -1,
        rack_id: str | None = None,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> ConsumerProtocolSubscription: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[ConsumerProtocolSubscription, int]: ...

class ConsumerProtocolAssignment(Message):
    """Kafka's ConsumerProtocolAssignment (protocol/schemas/ConsumerProtocolAssignment.json): versions 0-3."""

    class TopicPartition(Struct):
        topic: str  # v0+
        partitions: list[int]  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            topic: str = "",
            partitions: list[int] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    assigned_partitions: list[ConsumerProtocolAssignment.TopicPartition]  # v0+
    user_data: bytes | None  # v0+, nullable v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        assigned_partitions: list[ConsumerProtocolAssignment.TopicPartition] = ...,
        user_data: bytes | None = None,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> ConsumerProtocolAssignment: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[ConsumerProtocolAssignment, int]: ...
