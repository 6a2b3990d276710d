"""Broker addresses inside relayed Produce and Fetch responses (KIP-951), found cheaply.

Since KIP-951 a broker that is not a partition's leader answers Produce (v10+) and Fetch (v16+)
with NOT_LEADER_OR_FOLLOWER, the partition's ``CurrentLeader`` and, in the root tagged field
``NodeEndpoints`` (tag 0), the leader's host and port. Clients act on that address at once
(librdkafka: "Nodename changed"), so a relay that passes it through sends its clients around it.

The field lives in the root's tagged fields, after every partition. Finding it by decoding the
response would build an object per field and copy every record batch; this module walks to the
root's tagged-field section without building anything (the C decoder's ``tag_section``) and
reads only the tag headers. A response that carries no endpoints — almost every one — is relayed
as it came. Without the C decoder the response is decoded whole instead: slower, same answer. A
large Fetch answer that was streamed is held as the pieces it arrived in and walked as they are
(fetch_pieces.py), never joined.
"""

from __future__ import annotations

from collections.abc import Sequence

from . import messages as m
from .fetch_pieces import fetch_root_tags_at, tail
from .frames import skip_tagged_fields
from .messages import RESPONSES, ApiKey
from .primitives import CodecError, decode_uvarint, encode_uvarint

NODE_ENDPOINTS_TAG = 0

# Relayed API -> the first version whose response can carry NodeEndpoints.
NODE_ENDPOINTS_SINCE: dict[int, int] = {ApiKey.PRODUCE: 10, ApiKey.FETCH: 16}


def body_start(frame: bytes, flexible: bool) -> int:
    """Where a response body starts in ``frame`` (size prefix stripped): after the correlation id
    and, for a flexible response header, its tagged fields."""
    if len(frame) < 4:
        raise CodecError("response shorter than its header")
    return skip_tagged_fields(frame, 4) if flexible else 4


def carries_node_endpoints(api_key: int, version: int, frame: bytes) -> bool:
    """Whether a Produce or Fetch response frame (size prefix stripped) has NodeEndpoints.

    Raises CodecError when the frame is not a well-formed response of that API and version.
    """
    since = NODE_ENDPOINTS_SINCE.get(api_key)
    if since is None or version < since:
        return False
    cls = RESPONSES[api_key]
    pos = body_start(frame, True)  # every version with NodeEndpoints is flexible
    tags_at = cls.tag_section(frame, pos, version)
    if tags_at is None:
        body, _ = cls.decode_from(frame, pos, version)
        assert isinstance(body, (m.ProduceResponse, m.FetchResponse))
        return bool(body.node_endpoints)
    return _lists_node_endpoints(frame, tags_at)


def _lists_node_endpoints(frame: bytes, tags_at: int) -> bool:
    """Whether the root tagged fields at ``tags_at`` hold a non-empty NodeEndpoints."""
    count, pos = decode_uvarint(frame, tags_at)
    for _ in range(count):
        tag, pos = decode_uvarint(frame, pos)
        size, pos = decode_uvarint(frame, pos)
        if tag == NODE_ENDPOINTS_TAG:
            if pos + size > len(frame):
                raise CodecError("NodeEndpoints past end of frame")
            # tansu sends the field on every Fetch v16+ answer, mostly as an empty array (compact
            # length 1; 0 would be null): nothing to rewrite, and decoding and re-encoding every
            # fetched record for it cost a third of the consume throughput of 10 KB records.
            length, _ = decode_uvarint(frame, pos)
            return length > 1
        pos += size
    if pos > len(frame):
        raise CodecError("tagged field past end of frame")
    return False


# An unknown root tag stands in for NodeEndpoints in an answer whose length was already sent.
# Clients keep or skip tags they do not know (Kafka's generated readers, librdkafka).
FILLER_TAG = 1 << 20


def without_node_endpoints(api_key: int, version: int, frame: bytes, keep: int) -> bytes | None:
    """``frame[keep:]`` with a non-empty NodeEndpoints replaced by a filler field of the same
    length, or None when there is nothing to replace. For a relay that already sent the frame's
    size and its first ``keep`` bytes: the root tagged fields, where the field lives, must all
    lie after ``keep`` (CodecError otherwise, or when the C decoder cannot find them)."""
    if not carries_node_endpoints(api_key, version, frame):
        return None
    cls = RESPONSES[api_key]
    tags_at = cls.tag_section(frame, body_start(frame, True), version)
    if tags_at is None:
        raise CodecError("NodeEndpoints cannot be located without the C decoder")
    return _filled_rest(frame, 0, keep, tags_at)


def _filled_rest(data: bytes, data_at: int, keep: int, tags_at: int) -> bytes:
    """A frame's bytes from ``keep`` on, taken from ``data`` (its bytes from ``data_at`` on), with the
    root tagged fields at ``tags_at`` (in the frame) replaced by a filler of their length: CodecError
    when they began before ``keep``. One copy of the bytes kept, whichever part of the frame is held."""
    if tags_at < keep:
        raise CodecError(f"root tagged fields start at {tags_at}, before the {keep} bytes already sent")
    return data[keep - data_at : tags_at - data_at] + filler_tags(len(data) + data_at - tags_at)


def streamed_rest(api_key: int, version: int, pieces: Sequence[bytes], keep: int) -> bytes:
    """:func:`without_node_endpoints` for an answer held as the pieces it arrived in, not joined:
    its bytes from ``keep`` on, a non-empty NodeEndpoints replaced by a filler of the same length.
    A Fetch answer is walked piece by piece (fetch_pieces.py: only its end is joined); another
    answer that can carry the field is joined and checked as a whole."""
    rest = tail(pieces, keep)
    since = NODE_ENDPOINTS_SINCE.get(api_key)
    if since is None or version < since:
        return rest
    if api_key != ApiKey.FETCH:
        return without_node_endpoints(api_key, version, b"".join(pieces), keep) or rest
    tags_at = fetch_root_tags_at(pieces, version)
    if not _lists_node_endpoints(rest if tags_at >= keep else tail(pieces, tags_at), max(0, tags_at - keep)):
        return rest
    return _filled_rest(rest, keep, keep, tags_at)


def filler_tags(length: int) -> bytes:
    """A tagged-field section of exactly ``length`` bytes holding one unknown field."""
    tag = encode_uvarint(FILLER_TAG)
    for size in range(length, -1, -1):  # the size's own varint length depends on the size
        head = b"\x01" + tag + encode_uvarint(size)
        if len(head) + size == length:
            return head + bytes(size)
    raise CodecError(f"no tagged-field section of {length} bytes")
