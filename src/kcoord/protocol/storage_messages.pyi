# Typed stub of kcoord.protocol.storage_messages: written by `python -m kcoord.protocol.stubgen` from protocol/schemas.
# Do not edit; tests/unit/test_stubs.py fails when it is stale.

import uuid
from typing import ClassVar, TypeVar

from .codegen import Message, Struct
from .messages import ApiVersionsRequest as ApiVersionsRequest
from .messages import ApiVersionsResponse as ApiVersionsResponse
from .messages import FetchRequest as FetchRequest
from .messages import FetchResponse as FetchResponse
from .messages import FindCoordinatorRequest as FindCoordinatorRequest
from .messages import FindCoordinatorResponse as FindCoordinatorResponse
from .messages import MetadataRequest as MetadataRequest
from .messages import MetadataResponse as MetadataResponse
from .messages import ProduceRequest as ProduceRequest
from .messages import ProduceResponse as ProduceResponse
from .schema import MessageSchema

_M = TypeVar("_M", bound=Message)

STORAGE_STEMS: list[str]
RESPONSE_OF: dict[type[Message], type[Message]]

def encode_request(request: Message, version: int, correlation_id: int, client_id: str) -> bytes: ...
def decode_response(response_cls: type[_M], version: int, payload: bytes) -> tuple[int, _M]: ...

class ListOffsetsRequest(Message):
    """Kafka's ListOffsetsRequest (protocol/schemas/ListOffsetsRequest.json): versions 1-11, flexible v6+."""

    class ListOffsetsTopic(Struct):
        name: str  # v0+
        partitions: list[ListOffsetsRequest.ListOffsetsPartition]  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            name: str = "",
            partitions: list[ListOffsetsRequest.ListOffsetsPartition] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class ListOffsetsPartition(Struct):
        partition_index: int  # v0+
        current_leader_epoch: int  # v4+
        timestamp: int  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            partition_index: int = 0,
            current_leader_epoch: int = -1,
            timestamp: int = 0,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    replica_id: int  # v0+
    isolation_level: int  # v2+
    topics: list[ListOffsetsRequest.ListOffsetsTopic]  # v0+
    timeout_ms: int  # v10+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        replica_id: int = 0,
        isolation_level: int = 0,
        topics: list[ListOffsetsRequest.ListOffsetsTopic] = ...,
        timeout_ms: int = 0,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> ListOffsetsRequest: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[ListOffsetsRequest, int]: ...

class ListOffsetsResponse(Message):
    """Kafka's ListOffsetsResponse (protocol/schemas/ListOffsetsResponse.json): versions 1-11, flexible v6+."""

    class ListOffsetsTopicResponse(Struct):
        name: str  # v0+
        partitions: list[ListOffsetsResponse.ListOffsetsPartitionResponse]  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            name: str = "",
            partitions: list[ListOffsetsResponse.ListOffsetsPartitionResponse] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class ListOffsetsPartitionResponse(Struct):
        partition_index: int  # v0+
        error_code: int  # v0+
        timestamp: int  # v1+
        offset: int  # v1+
        leader_epoch: int  # v4+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            partition_index: int = 0,
            error_code: int = 0,
            timestamp: int = -1,
            offset: int = -1,
            leader_epoch: int = -1,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    throttle_time_ms: int  # v2+
    topics: list[ListOffsetsResponse.ListOffsetsTopicResponse]  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        throttle_time_ms: int = 0,
        topics: list[ListOffsetsResponse.ListOffsetsTopicResponse] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> ListOffsetsResponse: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[ListOffsetsResponse, int]: ...

class InitProducerIdRequest(Message):
    """Kafka's InitProducerIdRequest (protocol/schemas/InitProducerIdRequest.json): versions 0-6, flexible v2+."""

    SCHEMA: ClassVar[MessageSchema]
    transactional_id: str | None  # v0+, nullable v0+
    transaction_timeout_ms: int  # v0+
    producer_id: int  # v3+
    producer_epoch: int  # v3+
    enable2_pc: bool  # v6+
    keep_prepared_txn: bool  # v6+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        transactional_id: str | None = "",
        transaction_timeout_ms: int = 0,
        producer_id: int = -1,
        producer_epoch: int = -1,
        enable2_pc: bool = False,
        keep_prepared_txn: bool = False,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> InitProducerIdRequest: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[InitProducerIdRequest, int]: ...

class InitProducerIdResponse(Message):
    """Kafka's InitProducerIdResponse (protocol/schemas/InitProducerIdResponse.json): versions 0-6, flexible v2+."""

    SCHEMA: ClassVar[MessageSchema]
    throttle_time_ms: int  # v0+
    error_code: int  # v0+
    producer_id: int  # v0+
    producer_epoch: int  # v0+
    ongoing_txn_producer_id: int  # v6+
    ongoing_txn_producer_epoch: int  # v6+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        throttle_time_ms: int = 0,
        error_code: int = 0,
        producer_id: int = -1,
        producer_epoch: int = 0,
        ongoing_txn_producer_id: int = -1,
        ongoing_txn_producer_epoch: int = -1,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> InitProducerIdResponse: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[InitProducerIdResponse, int]: ...

class CreateTopicsRequest(Message):
    """Kafka's CreateTopicsRequest (protocol/schemas/CreateTopicsRequest.json): versions 2-7, flexible v5+."""

    class CreatableTopic(Struct):
        name: str  # v0+
        num_partitions: int  # v0+
        replication_factor: int  # v0+
        assignments: list[CreateTopicsRequest.CreatableReplicaAssignment]  # v0+
        configs: list[CreateTopicsRequest.CreatableTopicConfig]  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            name: str = "",
            num_partitions: int = 0,
            replication_factor: int = 0,
            assignments: list[CreateTopicsRequest.CreatableReplicaAssignment] = ...,
            configs: list[CreateTopicsRequest.CreatableTopicConfig] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class CreatableReplicaAssignment(Struct):
        partition_index: int  # v0+
        broker_ids: list[int]  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            partition_index: int = 0,
            broker_ids: list[int] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class CreatableTopicConfig(Struct):
        name: str  # v0+
        value: str | None  # v0+, nullable v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            name: str = "",
            value: str | None = "",
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    topics: list[CreateTopicsRequest.CreatableTopic]  # v0+
    timeout_ms: int  # v0+
    validate_only: bool  # v1+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        topics: list[CreateTopicsRequest.CreatableTopic] = ...,
        timeout_ms: int = 60000,
        validate_only: bool = False,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> CreateTopicsRequest: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[CreateTopicsRequest, int]: ...

class CreateTopicsResponse(Message):
    """Kafka's CreateTopicsResponse (protocol/schemas/CreateTopicsResponse.json): versions 2-7, flexible v5+."""

    class CreatableTopicResult(Struct):
        name: str  # v0+
        topic_id: uuid.UUID  # v7+
        error_code: int  # v0+
        error_message: str | None  # v1+, nullable v0+
        topic_config_error_code: int  # v5+, tag 0 v5+
        num_partitions: int  # v5+
        replication_factor: int  # v5+
        configs: list[CreateTopicsResponse.CreatableTopicConfigs] | None  # v5+, nullable v5+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            name: str = "",
            topic_id: uuid.UUID = ...,
            error_code: int = 0,
            error_message: str | None = "",
            topic_config_error_code: int = 0,
            num_partitions: int = -1,
            replication_factor: int = -1,
            configs: list[CreateTopicsResponse.CreatableTopicConfigs] | None = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class CreatableTopicConfigs(Struct):
        name: str  # v5+
        value: str | None  # v5+, nullable v5+
        read_only: bool  # v5+
        config_source: int  # v5+
        is_sensitive: bool  # v5+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            name: str = "",
            value: str | None = "",
            read_only: bool = False,
            config_source: int = -1,
            is_sensitive: bool = False,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    throttle_time_ms: int  # v2+
    topics: list[CreateTopicsResponse.CreatableTopicResult]  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        throttle_time_ms: int = 0,
        topics: list[CreateTopicsResponse.CreatableTopicResult] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> CreateTopicsResponse: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[CreateTopicsResponse, int]: ...

class DescribeConfigsRequest(Message):
    """Kafka's DescribeConfigsRequest (protocol/schemas/DescribeConfigsRequest.json): versions 1-4, flexible v4+."""

    class DescribeConfigsResource(Struct):
        resource_type: int  # v0+
        resource_name: str  # v0+
        configuration_keys: list[str] | None  # v0+, nullable v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            resource_type: int = 0,
            resource_name: str = "",
            configuration_keys: list[str] | None = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    resources: list[DescribeConfigsRequest.DescribeConfigsResource]  # v0+
    include_synonyms: bool  # v1+
    include_documentation: bool  # v3+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        resources: list[DescribeConfigsRequest.DescribeConfigsResource] = ...,
        include_synonyms: bool = False,
        include_documentation: bool = False,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> DescribeConfigsRequest: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[DescribeConfigsRequest, int]: ...

class DescribeConfigsResponse(Message):
    """Kafka's DescribeConfigsResponse (protocol/schemas/DescribeConfigsResponse.json): versions 1-4, flexible v4+."""

    class DescribeConfigsResult(Struct):
        error_code: int  # v0+
        error_message: str | None  # v0+, nullable v0+
        resource_type: int  # v0+
        resource_name: str  # v0+
        configs: list[DescribeConfigsResponse.DescribeConfigsResourceResult]  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            error_code: int = 0,
            error_message: str | None = "",
            resource_type: int = 0,
            resource_name: str = "",
            configs: list[DescribeConfigsResponse.DescribeConfigsResourceResult] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class DescribeConfigsResourceResult(Struct):
        name: str  # v0+
        value: str | None  # v0+, nullable v0+
        read_only: bool  # v0+
        config_source: int  # v1+
        is_sensitive: bool  # v0+
        synonyms: list[DescribeConfigsResponse.DescribeConfigsSynonym]  # v1+
        config_type: int  # v3+
        documentation: str | None  # v3+, nullable v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            name: str = "",
            value: str | None = "",
            read_only: bool = False,
            config_source: int = -1,
            is_sensitive: bool = False,
            synonyms: list[DescribeConfigsResponse.DescribeConfigsSynonym] = ...,
            config_type: int = 0,
            documentation: str | None = "",
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class DescribeConfigsSynonym(Struct):
        name: str  # v1+
        value: str | None  # v1+, nullable v0+
        source: int  # v1+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            name: str = "",
            value: str | None = "",
            source: int = 0,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    throttle_time_ms: int  # v0+
    results: list[DescribeConfigsResponse.DescribeConfigsResult]  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        throttle_time_ms: int = 0,
        results: list[DescribeConfigsResponse.DescribeConfigsResult] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> DescribeConfigsResponse: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[DescribeConfigsResponse, int]: ...

class AddPartitionsToTxnRequest(Message):
    """Kafka's AddPartitionsToTxnRequest (protocol/schemas/AddPartitionsToTxnRequest.json): versions 0-5, flexible v3+."""

    class AddPartitionsToTxnTransaction(Struct):
        transactional_id: str  # v4+
        producer_id: int  # v4+
        producer_epoch: int  # v4+
        verify_only: bool  # v4+
        topics: list[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic]  # v4+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            transactional_id: str = "",
            producer_id: int = 0,
            producer_epoch: int = 0,
            verify_only: bool = False,
            topics: list[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class AddPartitionsToTxnTopic(Struct):
        name: str  # v0+
        partitions: list[int]  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            name: str = "",
            partitions: list[int] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    transactions: list[AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction]  # v4+
    v3_and_below_transactional_id: str  # v0-3
    v3_and_below_producer_id: int  # v0-3
    v3_and_below_producer_epoch: int  # v0-3
    v3_and_below_topics: list[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic]  # v0-3
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        transactions: list[AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction] = ...,
        v3_and_below_transactional_id: str = "",
        v3_and_below_producer_id: int = 0,
        v3_and_below_producer_epoch: int = 0,
        v3_and_below_topics: list[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> AddPartitionsToTxnRequest: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[AddPartitionsToTxnRequest, int]: ...

class AddPartitionsToTxnResponse(Message):
    """Kafka's AddPartitionsToTxnResponse (protocol/schemas/AddPartitionsToTxnResponse.json): versions 0-5, flexible v3+."""

    class AddPartitionsToTxnResult(Struct):
        transactional_id: str  # v4+
        topic_results: list[AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult]  # v4+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            transactional_id: str = "",
            topic_results: list[AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class AddPartitionsToTxnTopicResult(Struct):
        name: str  # v0+
        results_by_partition: list[AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult]  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            name: str = "",
            results_by_partition: list[AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult] = ...,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    class AddPartitionsToTxnPartitionResult(Struct):
        partition_index: int  # v0+
        partition_error_code: int  # v0+
        unknown_tagged: list[tuple[int, bytes]] | None
        def __init__(
            self,
            partition_index: int = 0,
            partition_error_code: int = 0,
            unknown_tagged: list[tuple[int, bytes]] | None = None,
        ) -> None: ...

    SCHEMA: ClassVar[MessageSchema]
    throttle_time_ms: int  # v0+
    error_code: int  # v4+
    results_by_transaction: list[AddPartitionsToTxnResponse.AddPartitionsToTxnResult]  # v4+
    results_by_topic_v3_and_below: list[AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult]  # v0-3
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        throttle_time_ms: int = 0,
        error_code: int = 0,
        results_by_transaction: list[AddPartitionsToTxnResponse.AddPartitionsToTxnResult] = ...,
        results_by_topic_v3_and_below: list[AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult] = ...,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> AddPartitionsToTxnResponse: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[AddPartitionsToTxnResponse, int]: ...

class EndTxnRequest(Message):
    """Kafka's EndTxnRequest (protocol/schemas/EndTxnRequest.json): versions 0-5, flexible v3+."""

    SCHEMA: ClassVar[MessageSchema]
    transactional_id: str  # v0+
    producer_id: int  # v0+
    producer_epoch: int  # v0+
    committed: bool  # v0+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        transactional_id: str = "",
        producer_id: int = 0,
        producer_epoch: int = 0,
        committed: bool = False,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> EndTxnRequest: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[EndTxnRequest, int]: ...

class EndTxnResponse(Message):
    """Kafka's EndTxnResponse (protocol/schemas/EndTxnResponse.json): versions 0-5, flexible v3+."""

    SCHEMA: ClassVar[MessageSchema]
    throttle_time_ms: int  # v0+
    error_code: int  # v0+
    producer_id: int  # v5+
    producer_epoch: int  # v5+
    unknown_tagged: list[tuple[int, bytes]] | None
    def __init__(
        self,
        throttle_time_ms: int = 0,
        error_code: int = 0,
        producer_id: int = -1,
        producer_epoch: int = -1,
        unknown_tagged: list[tuple[int, bytes]] | None = None,
    ) -> None: ...
    def encode(self, version: int) -> bytes: ...
    def encode_into(self, out: bytearray, version: int) -> None: ...
    @classmethod
    def decode(cls, data: bytes, version: int) -> EndTxnResponse: ...
    @classmethod
    def decode_from(
        cls,
        data: bytes,
        pos: int,
        version: int,
        end: int | None = None,
    ) -> tuple[EndTxnResponse, int]: ...
