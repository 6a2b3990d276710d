"""A streamed answer's NodeEndpoints give way to an unknown tag of the same length (endpoints.py)."""

from __future__ import annotations

import uuid

import pytest

from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol.codec import DECODER_BACKEND
from kcoord.protocol.endpoints import FILLER_TAG, filler_tags, without_node_endpoints
from kcoord.protocol.primitives import CodecError, decode_uvarint

R = m.FetchResponse


@pytest.mark.parametrize("length", [5, 6, 7, 127, 128, 129, 130, 131, 200, 16_384, 16_389, 70_000])
def test_filler_is_one_unknown_tagged_field_of_exactly_the_length(length: int) -> None:
    section = filler_tags(length)
    assert len(section) == length
    count, pos = decode_uvarint(section, 0)
    tag, pos = decode_uvarint(section, pos)
    size, pos = decode_uvarint(section, pos)
    assert (count, tag, pos + size) == (1, FILLER_TAG, length)


def test_no_filler_shorter_than_its_own_header() -> None:
    with pytest.raises(CodecError):
        filler_tags(4)


def answer(endpoints: bool) -> bytes:
    response = R(
        responses=[R.FetchableTopicResponse(topic_id=uuid.UUID(int=1), partitions=[
            R.PartitionData(partition_index=0, high_watermark=3, records=b"r" * 1000),
            R.PartitionData(partition_index=1, error_code=6, current_leader=R.LeaderIdAndEpoch(leader_id=2, leader_epoch=4)),
        ])],
        node_endpoints=[R.NodeEndpoint(node_id=2, host="broker-2.example.com", port=9092, rack="a")] if endpoints else [],
    )  # fmt: skip
    return frames.encode_response(1, 16, 9, response)[4:]


@pytest.mark.skipif(
    DECODER_BACKEND != "c", reason="locating the root tagged fields without decoding needs the C decoder"
)
def test_endpoints_replaced_in_place_and_the_rest_unchanged() -> None:
    raw = answer(endpoints=True)
    keep = 500
    rest = without_node_endpoints(1, 16, raw, keep)
    assert rest is not None and len(rest) == len(raw) - keep
    streamed = raw[:keep] + rest
    _, decoded = frames.decode_response(1, 16, streamed)
    _, original = frames.decode_response(1, 16, raw)
    assert decoded.node_endpoints == [] and original.node_endpoints
    assert decoded.responses == original.responses
    assert b"broker-2.example.com" not in streamed


@pytest.mark.skipif(
    DECODER_BACKEND != "c", reason="locating the root tagged fields without decoding needs the C decoder"
)
def test_nothing_to_replace_and_too_late_to_replace() -> None:
    assert without_node_endpoints(1, 16, answer(endpoints=False), 500) is None
    raw = answer(endpoints=True)
    with pytest.raises(CodecError):
        without_node_endpoints(1, 16, raw, len(raw) - 3)  # its first bytes were sent already
