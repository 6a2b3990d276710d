"""The client-side messages kcoord's Kafka storage speaks to the upstream cluster.

These are the APIs kcoord *sends* (never serves): Produce, Fetch, ListOffsets, InitProducerId,
CreateTopics, DescribeConfigs, DescribeAcls, AddPartitionsToTxn, EndTxn, SaslHandshake and SaslAuthenticate (its
own login; its SASL listeners also read the clients' and relay them: :func:`decode_request`,
:func:`encode_response`), plus Produce/Fetch/Metadata/
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
from .frames import parse_request_header, skip_tagged_fields
from .generated.storage_messages import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
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
    "DescribeAclsRequest",
    "DescribeAclsResponse",
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
    "SaslAuthenticateRequest",
    "SaslAuthenticateResponse",
    "SaslHandshakeRequest",
    "SaslHandshakeResponse",
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
    DescribeAclsRequest: DescribeAclsResponse,
    AddPartitionsToTxnRequest: AddPartitionsToTxnResponse,
    EndTxnRequest: EndTxnResponse,
    MetadataRequest: MetadataResponse,
    FindCoordinatorRequest: FindCoordinatorResponse,
    ApiVersionsRequest: ApiVersionsResponse,
    SaslHandshakeRequest: SaslHandshakeResponse,
    SaslAuthenticateRequest: SaslAuthenticateResponse,
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


def encode_response(version: int, correlation_id: int, response: Message) -> bytes:
    """A whole response frame (size prefix included) of one of these APIs; kcoord answers the SASL
    APIs on its SASL listeners. Header v1 iff the version is flexible (none is ApiVersions)."""
    out = bytearray(_INT32.pack(0) + _INT32.pack(correlation_id))
    if version in response.SCHEMA.flexible:
        out.append(0)  # no tagged fields in the header
    response.encode_into(out, version)
    _INT32.pack_into(out, 0, len(out) - 4)
    return bytes(out)


def decode_request(request_cls: type[_M], version: int, payload: bytes) -> _M:
    """Decode a request frame (without size prefix) of one of these APIs; trailing bytes are an error."""
    header = parse_request_header(payload, flexible=version in request_cls.SCHEMA.flexible)
    body, end = request_cls.decode_from(payload, header.size, version)
    if end != len(payload):
        raise CodecError(f"{request_cls.__name__} v{version}: {len(payload) - end} trailing bytes")
    return body
