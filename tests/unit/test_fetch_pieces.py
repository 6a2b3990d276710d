"""A streamed Fetch answer's end is found in the pieces it came in, as in the joined answer.

The relay writes a large Fetch answer while it arrives and keeps the pieces, never joined
(protocol/fetch_pieces.py). What it then writes of the end must be what the joined answer gave:
the root tagged fields at the same offset as the C decoder's ``tag_section`` finds them, and
NodeEndpoints replaced exactly as ``without_node_endpoints`` replaces them.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol.codec import DECODER_BACKEND, MISSING
from kcoord.protocol.endpoints import body_start, streamed_rest, without_node_endpoints
from kcoord.protocol.fetch_pieces import PiecesReader, fetch_root_tags_at, tail
from kcoord.protocol.messages import ApiKey
from kcoord.protocol.primitives import CodecError

R = m.FetchResponse
VERSIONS = st.integers(min_value=12, max_value=R.SCHEMA.valid.high)
needs_c = pytest.mark.skipif(
    DECODER_BACKEND != "c", reason="the reference offset is the C decoder's tag_section"
)


@st.composite
def fetch_answers(draw: st.DrawFn) -> tuple[int, bytes]:
    """(version, a Fetch answer's payload): topics, partitions, records, aborted transactions,
    per-partition tagged fields and root NodeEndpoints all optional, a few MB at most."""
    version = draw(VERSIONS)
    partition = st.builds(
        R.PartitionData,
        partition_index=st.integers(0, 2**31 - 1),
        error_code=st.sampled_from([0, 6, 74]),
        high_watermark=st.integers(-1, 2**40),
        aborted_transactions=st.one_of(
            st.none(),
            st.lists(
                st.builds(
                    R.AbortedTransaction,
                    producer_id=st.integers(0, 2**40),
                    first_offset=st.integers(0, 2**40),
                ),
                max_size=3,
            ),
        ),
        current_leader=st.one_of(
            st.just(MISSING),  # absent: the field's default
            st.builds(R.LeaderIdAndEpoch, leader_id=st.integers(0, 9), leader_epoch=st.integers(0, 9)),
        ),
        records=st.one_of(st.none(), st.binary(max_size=64), st.integers(0, 300_000).map(lambda n: b"r" * n)),
    )
    topic = st.builds(
        R.FetchableTopicResponse,
        topic=st.text(min_size=1, max_size=20),
        topic_id=st.uuids(),
        partitions=st.lists(partition, max_size=5),
    )
    endpoints = st.lists(
        st.builds(
            R.NodeEndpoint,
            node_id=st.integers(0, 9),
            host=st.text(min_size=1, max_size=30),
            port=st.integers(1, 65535),
            rack=st.one_of(st.none(), st.text(max_size=5)),
        ),
        max_size=2,
    )
    response = R(
        throttle_time_ms=draw(st.integers(0, 1000)),
        session_id=draw(st.integers(0, 2**31 - 1)),
        responses=draw(st.lists(topic, max_size=3)),
        node_endpoints=draw(endpoints) if version >= 16 else [],
    )
    return version, frames.encode_response(ApiKey.FETCH, version, draw(st.integers(0, 2**31 - 1)), response)[
        4:
    ]


def cut(draw: st.DrawFn, raw: bytes) -> list[bytes]:
    """``raw`` in pieces, as reads bring it: empty ones and one-byte ones included."""
    points = sorted(draw(st.lists(st.integers(0, len(raw)), max_size=12)))
    edges = [0, *points, len(raw)]
    return [raw[a:b] for a, b in zip(edges, edges[1:], strict=False)]


@needs_c
@settings(max_examples=300, deadline=None)
@given(answer=fetch_answers(), data=st.data())
def test_root_tags_are_where_the_c_decoder_finds_them_in_the_joined_answer(
    answer: tuple[int, bytes], data: st.DataObject
) -> None:
    version, raw = answer
    pieces = cut(data.draw, raw)
    expected = R.tag_section(raw, body_start(raw, True), version)
    assert fetch_root_tags_at(pieces, version) == expected


@needs_c
@settings(max_examples=300, deadline=None)
@given(answer=fetch_answers(), data=st.data())
def test_the_streamed_end_is_what_the_joined_answer_gives(
    answer: tuple[int, bytes], data: st.DataObject
) -> None:
    version, raw = answer
    pieces = cut(data.draw, raw)
    tags_at = R.tag_section(raw, body_start(raw, True), version)
    keep = data.draw(st.integers(0, len(raw)))
    try:
        expected: bytes | type[CodecError] = (
            without_node_endpoints(ApiKey.FETCH, version, raw, keep) or raw[keep:]
        )
    except CodecError:  # endpoints to replace, but their section began before keep: too late
        assert keep > tags_at
        expected = CodecError
    if expected is CodecError:
        with pytest.raises(CodecError):
            streamed_rest(ApiKey.FETCH, version, pieces, keep)
        return
    rest = streamed_rest(ApiKey.FETCH, version, pieces, keep)
    assert rest == expected and len(rest) == len(raw) - keep


def test_a_listed_leader_gives_way_to_a_filler_and_the_answer_still_decodes() -> None:
    records = b"x" * 100_000
    response = R(
        responses=[R.FetchableTopicResponse(topic_id=uuid.UUID(int=7), partitions=[
            R.PartitionData(partition_index=0, high_watermark=3, records=records),
            R.PartitionData(partition_index=1, error_code=6, current_leader=R.LeaderIdAndEpoch(leader_id=2, leader_epoch=4)),
        ])],
        node_endpoints=[R.NodeEndpoint(node_id=2, host="broker-2.example.com", port=9092, rack=None)],
    )  # fmt: skip
    raw = frames.encode_response(ApiKey.FETCH, 17, 5, response)[4:]
    pieces = [raw[i : i + 4096] for i in range(0, len(raw), 4096)]
    keep = len(raw) - 3000
    streamed = raw[:keep] + streamed_rest(ApiKey.FETCH, 17, pieces, keep)
    assert len(streamed) == len(raw) and b"broker-2.example.com" not in streamed
    _, decoded = frames.decode_response(ApiKey.FETCH, 17, streamed)
    assert decoded.node_endpoints == [] and decoded.responses == response.responses


def test_before_v16_nothing_is_read_but_the_end() -> None:
    pieces = [b"\x00" * 10, b"not a fetch answer at all"]  # v15 carries no NodeEndpoints: not walked
    assert streamed_rest(ApiKey.FETCH, 15, pieces, 12) == b"".join(pieces)[12:]


@pytest.mark.parametrize("keep", [0, 1, 3, 4, 5, 9, 10])
def test_tail_is_the_joined_bytes_from_keep(keep: int) -> None:
    pieces = [b"abc", b"", b"d", b"efghij"]
    assert tail(pieces, keep) == b"abcdefghij"[keep:]


def test_a_truncated_answer_is_a_codec_error_not_a_wrong_offset() -> None:
    response = R(responses=[R.FetchableTopicResponse(topic_id=uuid.UUID(int=1), partitions=[
        R.PartitionData(partition_index=0, records=b"r" * 1000)])])  # fmt: skip
    raw = frames.encode_response(ApiKey.FETCH, 16, 1, response)[4:]
    for end in (3, 20, len(raw) // 2, len(raw) - 2):
        with pytest.raises(CodecError):
            fetch_root_tags_at([raw[:end]], 16)
    with pytest.raises(CodecError):
        fetch_root_tags_at([raw], 11)  # not flexible


def test_the_reader_reads_across_pieces() -> None:
    r = PiecesReader([b"", b"\x81", b"", b"\x01\x05", b"abc"])
    assert r.uvarint() == 129 and r.byte() == 5
    r.skip(3)
    assert r.pos == r.end == 6
    with pytest.raises(CodecError):
        r.byte()
