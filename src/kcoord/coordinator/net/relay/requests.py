"""The few relayed requests kcoord reads or adjusts before they go upstream.

A relayed frame is not decoded beyond its request header, with two exceptions: a Produce's
``acks`` (read without decoding its records: acks=0 changes how its answer is paired) and a
Metadata v12+ asking for topics by id (re-encoded so any upstream finds them).
"""

from __future__ import annotations

import struct
import uuid

from kcoord.protocol import frames
from kcoord.protocol.messages import ApiKey
from kcoord.protocol.primitives import CodecError, decode_uvarint

_INT16 = struct.Struct(">h")
ACKS_ONE = _INT16.pack(1)

METADATA_BY_ID_SINCE = 12  # MetadataRequestTopic.name is nullable: a topic may be asked for by id
_ZERO_ID = uuid.UUID(int=0)


def metadata_asked_by_id(payload: bytes, version: int, correlation_id: int) -> bytes:
    """A Metadata v12+ request whose topics asked for by id carry the name "" (the Java consumer
    sends the schema default) with null names instead. Kafka looks a topic with a non-zero id up by
    its id whatever the name says; tansu answers such a topic INVALID_TOPIC_EXCEPTION, and the
    consumer of the consumer protocol, which learns its partitions' names this way, then never
    fetches. Other requests are relayed as they came."""
    client_id, request = frames.decode_request_body(payload, ApiKey.METADATA, version)
    topics = getattr(request, "topics", None) or ()
    by_id = [t for t in topics if t.name == "" and t.topic_id != _ZERO_ID]
    if not by_id:
        return payload
    for topic in by_id:
        topic.name = None
    return frames.encode_request(ApiKey.METADATA, version, correlation_id, client_id, request)[4:]


def produce_acks(frame_bytes: bytes, header_size: int, version: int) -> tuple[int, int]:
    """The ``acks`` of a Produce request (v3+: after the nullable transactional id) and its offset.

    A frame that ends before its acks raises CodecError (bad input: the connection closes)."""
    pos = header_size
    end = len(frame_bytes)
    if version >= 3:
        if version >= 9:
            n, pos = decode_uvarint(frame_bytes, pos)
            pos += max(n - 1, 0)
        else:
            if pos + 2 > end:
                raise CodecError(f"Produce v{version} truncated in its transactional id")
            (n,) = _INT16.unpack_from(frame_bytes, pos)
            pos += 2 + max(n, 0)
    if pos + 2 > end:
        raise CodecError(f"Produce v{version} ends before its acks ({end} bytes, acks at {pos})")
    (acks,) = _INT16.unpack_from(frame_bytes, pos)
    return acks, pos
