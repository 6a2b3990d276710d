"""The relayed APIs kcoord reads only to guard its own topics (from ``generated/relay_messages.py``).

kcoord neither serves nor sends these: it relays them. It decodes one only when the request names
one of kcoord's internal topics (coordinator/net/relay/guard.py), to refuse that part and relay the
rest, so these classes are kept out of :data:`kcoord.protocol.messages.REQUESTS` (what the
gateway serves) like the storage-only ones. :func:`decode_request_body` and
:func:`encode_response` take the message class explicitly, reading the header's flexibility from
its own schema.
"""

from __future__ import annotations

import struct
from typing import TypeVar

from .catalog import RELAY_STEMS as RELAY_STEMS  # the APIs decoded here
from .codec import Message
from .frames import skip_tagged_fields
from .generated.relay_messages import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from .primitives import CodecError

__all__ = [
    "AlterConfigsRequest",
    "AlterConfigsResponse",
    "AlterPartitionReassignmentsRequest",
    "AlterPartitionReassignmentsResponse",
    "CreatePartitionsRequest",
    "CreatePartitionsResponse",
    "DeleteRecordsRequest",
    "DeleteRecordsResponse",
    "DeleteTopicsRequest",
    "DeleteTopicsResponse",
    "IncrementalAlterConfigsRequest",
    "IncrementalAlterConfigsResponse",
    "WriteTxnMarkersRequest",
    "WriteTxnMarkersResponse",
    "decode_request_body",
    "encode_request_body",
    "encode_response",
]

_M = TypeVar("_M", bound=Message)
_INT16 = struct.Struct(">h")
_SIZE_AND_CORRELATION = struct.Struct(">ii")
_SIZE = struct.Struct(">i")


def body_start(frame_bytes: bytes, flexible: bool) -> int:
    """Where a request's body starts (past api key, version, correlation id, client id and, when
    ``flexible``, the header's tagged fields). A truncated header raises CodecError."""
    end = len(frame_bytes)
    if end < 10:
        raise CodecError("request header truncated before client id")
    (n,) = _INT16.unpack_from(frame_bytes, 8)
    pos = 10 + max(n, 0)
    if pos > end:
        raise CodecError("client id runs past end of frame")
    return skip_tagged_fields(frame_bytes, pos) if flexible else pos


def decode_request_body(cls: type[_M], frame_bytes: bytes, version: int) -> _M:
    """The body of a request frame (no size prefix) of class ``cls``; trailing bytes are an error."""
    schema = cls.SCHEMA
    if version not in schema.valid:
        raise CodecError(f"{cls.__name__} v{version} is not a version its spec defines")
    pos = body_start(frame_bytes, version in schema.flexible)
    body, end = cls.decode_from(frame_bytes, pos, version)
    if end != len(frame_bytes):
        raise CodecError(f"{cls.__name__} v{version}: {len(frame_bytes) - end} trailing bytes")
    return body


def encode_request_body(frame_bytes: bytes, request: Message, version: int) -> bytes:
    """``frame_bytes`` (a request frame without size prefix) with its body replaced by ``request``:
    the header (correlation id, client id, tagged fields) is kept byte for byte."""
    pos = body_start(frame_bytes, version in request.SCHEMA.flexible)
    out = bytearray(frame_bytes[:pos])
    request.encode_into(out, version)
    return bytes(out)


def encode_response(correlation_id: int, response: Message, version: int) -> bytes:
    """A complete response frame, size prefix included; header v1 iff the version is flexible."""
    out = bytearray(_SIZE_AND_CORRELATION.pack(0, correlation_id))
    if version in response.SCHEMA.flexible:
        out.append(0)  # no tagged fields in the header
    response.encode_into(out, version)
    _SIZE.pack_into(out, 0, len(out) - 4)
    return bytes(out)
