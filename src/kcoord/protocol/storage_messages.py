"""The client-side messages kcoord's Kafka storage speaks to the upstream cluster.

These are the APIs kcoord *sends* (never serves): Produce, Fetch, ListOffsets, InitProducerId,
CreateTopics, DescribeConfigs, AddPartitionsToTxn, EndTxn, plus Produce/Fetch/Metadata/
FindCoordinator/ApiVersions reused from :mod:`kcoord.protocol.messages` (the gateway reads those too). They are kept out of
``kcoord.protocol.messages.REQUESTS`` on purpose: that registry is what the gateway decodes and
serves, and a storage-only class there would change what the server claims to understand.

Requests are framed by :func:`kcoord.protocol.frames.encode_request`, which reads the header's
flexibility from the request's own class; :func:`decode_response` takes the response class
explicitly for the same reason. Header rules are Kafka's: response header v1 iff the version is
flexible, except ApiVersions which always answers with header v0.
"""

from __future__ import annotations

import struct
from typing import TypeVar

from .catalog import STORAGE_STEMS as STORAGE_STEMS  # the APIs only storage speaks
from .codec import Message
from .frames import skip_tagged_fields
from .generated.storage_messages import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
)
from .messages import (  # reused: the gateway reads these too; the rest are generated for storage
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchRequest,
    FetchResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from .primitives import CodecError

# The message classes storage speaks, re-exported (generated here or reused from messages).
__all__ = [
    "AddPartitionsToTxnRequest",
    "AddPartitionsToTxnResponse",
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "CreateTopicsRequest",
    "CreateTopicsResponse",
    "DescribeConfigsRequest",
    "DescribeConfigsResponse",
    "EndTxnRequest",
    "EndTxnResponse",
    "FetchRequest",
    "FetchResponse",
    "FindCoordinatorRequest",
    "FindCoordinatorResponse",
    "InitProducerIdRequest",
    "InitProducerIdResponse",
    "ListOffsetsRequest",
    "ListOffsetsResponse",
    "MetadataRequest",
    "MetadataResponse",
    "ProduceRequest",
    "ProduceResponse",
]

_M = TypeVar("_M", bound=Message)


# request class -> response class
RESPONSE_OF: dict[type[Message], type[Message]] = {
    ProduceRequest: ProduceResponse,
    FetchRequest: FetchResponse,
    ListOffsetsRequest: ListOffsetsResponse,
    InitProducerIdRequest: InitProducerIdResponse,
    CreateTopicsRequest: CreateTopicsResponse,
    DescribeConfigsRequest: DescribeConfigsResponse,
    AddPartitionsToTxnRequest: AddPartitionsToTxnResponse,
    EndTxnRequest: EndTxnResponse,
    MetadataRequest: MetadataResponse,
    FindCoordinatorRequest: FindCoordinatorResponse,
    ApiVersionsRequest: ApiVersionsResponse,
}

_INT32 = struct.Struct(">i")
_API_VERSIONS_KEY = 18


def decode_response(response_cls: type[_M], version: int, payload: bytes) -> tuple[int, _M]:
    """Decode a response frame (without size prefix) → ``(correlation_id, body)``."""
    if len(payload) < 4:
        raise CodecError("response shorter than its header")
    (correlation_id,) = _INT32.unpack_from(payload, 0)
    pos = 4
    schema = response_cls.SCHEMA
    if version in schema.flexible and schema.api_key != _API_VERSIONS_KEY:
        pos = skip_tagged_fields(payload, pos)
    body, end = response_cls.decode_from(payload, pos, version)
    if end != len(payload):
        raise CodecError(f"{response_cls.__name__} v{version}: {len(payload) - end} trailing bytes")
    return correlation_id, body
