"""Framing and headers: whole frames only, caps enforced before buffering, headers parsed per version."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.coordinator.net.relay.requests import produce_acks
from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol.primitives import CodecError


def test_frames_split_across_feeds() -> None:
    a = frames.frame(b"hello")
    b = frames.frame(b"")
    c = frames.frame(b"x" * 1000)
    data = a + b + c
    dec = frames.FrameDecoder()
    out: list[bytes] = []
    for i in range(0, len(data), 7):
        out += dec.feed(data[i : i + 7])
    assert out == [b"hello", b"", b"x" * 1000]
    assert dec.buffered == 0


@pytest.mark.parametrize("size", [0, 1, frames.LARGE_FRAME, frames.LARGE_FRAME + 1, 3 * frames.LARGE_FRAME])
def test_frame_parts_are_the_frame_and_keep_a_large_payload_uncopied(size: int) -> None:
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    head, body = frames.frame_parts(payload)
    assert head + (body or b"") == frames.frame(payload)
    if size > frames.LARGE_FRAME:
        assert body is payload and len(head) == 4
    else:
        assert body is None


@given(st.lists(st.binary(max_size=300), min_size=1, max_size=4), st.integers(0, 3))
@settings(max_examples=200, deadline=None)
def test_a_read_of_one_whole_frame_gives_what_any_read_gives(payloads: list[bytes], split: int) -> None:
    """A read that is exactly one frame, with nothing buffered, is sliced at once (the relay's
    common case); every other read goes through the buffer. Both yield the same frames."""
    data = b"".join(frames.frame(p) for p in payloads)
    whole = frames.FrameDecoder()
    one_by_one = frames.FrameDecoder()
    got = [f for p in payloads for f in one_by_one.feed(frames.frame(p))]  # one frame per read
    assert got == payloads and one_by_one.buffered == 0
    cut = min(split, len(data))
    assert whole.feed(data[:cut]) + whole.feed(data[cut:]) == payloads  # frames across reads
    assert whole.buffered == 0
    assert all(type(f) is bytes for f in got)


@settings(max_examples=200, deadline=None)
@given(
    large=st.integers(frames.LARGE_FRAME + 1, 3 * frames.LARGE_FRAME),
    small=st.binary(max_size=50),
    cuts=st.lists(st.integers(1, 3 * frames.LARGE_FRAME), min_size=1, max_size=8),
)
def test_a_large_frame_ends_as_its_pieces_and_what_follows_is_fed_on(
    large: int, small: bytes, cuts: list[int]
) -> None:
    """finish_large: the frame a relay streamed is handed over as the pieces it came in, joined
    nowhere, and the frames behind it in the same read come out of the next feed as ever."""
    payload = bytes(range(256)) * (large // 256) + b"x" * (large % 256)
    stream = frames.frame(payload) + frames.frame(small)
    d = frames.FrameDecoder()
    edges = sorted({0, *(c for c in cuts if c < len(stream)), len(stream)})
    reads = [stream[a:b] for a, b in zip(edges, edges[1:], strict=False)]
    got: list[bytes] = []
    finished = None
    for data in reads:
        if d.receiving_large and finished is None:
            done = d.finish_large(data)
            if done is not None:
                finished, data = done
        got += d.feed(data) if data else []
    if finished is None:  # the large frame came whole in one read: never partial, never streamed
        assert got == [payload, small]
        return
    assert b"".join(finished) == payload and got == [small]
    assert not d.receiving_large and d.buffered == 0


def test_finish_large_takes_nothing_before_the_frames_end() -> None:
    d = frames.FrameDecoder()
    framed = frames.frame(b"a" * (frames.LARGE_FRAME + 10))
    assert d.finish_large(framed[:100]) is None  # no large frame begun yet
    assert d.feed(framed[:100]) == []
    assert d.finish_large(framed[100:-1]) is None  # one byte short
    assert d.feed(framed[100:-1]) == []
    done = d.finish_large(framed[-1:] + b"\x00\x00")
    assert done is not None and b"".join(done[0]) == framed[4:] and done[1] == b"\x00\x00"


def test_a_whole_oversized_frame_in_one_read_is_rejected() -> None:
    dec = frames.FrameDecoder(max_frame_size=10)
    with pytest.raises(frames.FrameTooLarge):
        dec.feed(frames.frame(b"x" * 11))


def test_oversized_prefix_rejected_before_body_arrives() -> None:
    dec = frames.FrameDecoder(max_frame_size=1024)
    with pytest.raises(frames.FrameTooLarge):
        dec.feed(struct.pack(">i", 2**31 - 1))


def test_negative_prefix_rejected() -> None:
    with pytest.raises(frames.FrameTooLarge):
        frames.FrameDecoder().feed(struct.pack(">i", -1))


@pytest.mark.parametrize("version", range(0, 5))
def test_request_round_trip_every_heartbeat_version(version: int) -> None:
    req = m.HeartbeatRequest(
        group_id="g", generation_id=7, member_id="m", group_instance_id="i" if version >= 3 else None
    )
    data = frames.encode_request(12, version, 42, "client-1", req)
    (payload,) = frames.FrameDecoder().feed(data)
    header, body = frames.decode_request(payload)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        12,
        version,
        42,
        "client-1",
    )
    assert body == req


def test_flexible_request_header_skips_tagged_fields() -> None:
    req = m.HeartbeatRequest(group_id="g", generation_id=1, member_id="m")
    body = req.encode(4)
    # header v2 with a null client id and one unknown tagged field (tag 5, 3 bytes)
    header = struct.pack(">hhih", 12, 4, 9, -1) + bytes([1, 5, 3, 1, 2, 3])
    h, decoded = frames.decode_request(header + body)
    assert h.client_id is None and h.size == len(header)
    assert decoded == req


def test_api_versions_response_always_uses_header_v0() -> None:
    resp = m.ApiVersionsResponse(error_code=0, api_keys=[])
    data = frames.encode_response(18, 3, 5, resp)
    assert data[8:10] == b"\x00\x00"  # error code right after the correlation id: no tagged-field byte
    assert frames.decode_response(18, 3, data[4:]) == (5, resp)


def test_flexible_response_header_has_tagged_fields() -> None:
    data = frames.encode_response(12, 4, 5, m.HeartbeatResponse(error_code=0))
    assert data[8] == 0  # empty tagged-field section of response header v1


def test_truncated_header_is_a_codec_error() -> None:
    with pytest.raises(CodecError):
        frames.parse_request_header(b"\x00\x0c\x00")
    with pytest.raises(CodecError):
        frames.parse_request_header(struct.pack(">hhih", 12, 0, 1, 50) + b"short")


@pytest.mark.parametrize(
    ("version", "txn"), [(3, None), (3, "tx"), (8, "tx"), (9, None), (9, "transactional")]
)
def test_produce_acks_parsed_after_transactional_id(version: int, txn: str | None) -> None:
    flexible = version >= 9
    header = struct.pack(">hhih", 0, version, 1, 1) + b"c" + (b"\x00" if flexible else b"")
    if flexible:
        tid = b"\x00" if txn is None else bytes([len(txn) + 1]) + txn.encode()
    else:
        tid = struct.pack(">h", -1) if txn is None else struct.pack(">h", len(txn)) + txn.encode()
    payload = header + tid + struct.pack(">h", 0) + b"rest"
    h = frames.parse_request_header(payload, flexible=flexible)
    acks, offset = produce_acks(payload, h.size, version)
    assert acks == 0 and payload[offset + 2 :] == b"rest"
    payload = header + tid + struct.pack(">h", -1) + b"rest"
    assert produce_acks(payload, h.size, version)[0] == -1


def _produce_frame(version: int, txn: str | None) -> bytes:
    R = m.ProduceRequest
    request = R(transactional_id=txn, acks=-1, timeout_ms=1000, topic_data=[R.TopicProduceData(
        name="t", partition_data=[R.PartitionProduceData(index=0, records=b"\x00" * 70)])])  # fmt: skip
    return frames.encode_request(0, version, 7, "producer", request)[4:]


@pytest.mark.parametrize("version", [3, 8, 9, 11, 12])
@pytest.mark.parametrize("txn", [None, "a-transactional-id"])
def test_produce_acks_of_a_truncated_produce_is_a_codec_error(version: int, txn: str | None) -> None:
    """The pass-through path reads a Produce's acks and nothing else; a frame
    cut anywhere before them is bad input (CodecError: one log line, the connection closes),
    never a struct.error (a traceback from the event loop)."""
    payload = _produce_frame(version, txn)
    flexible = version >= 9
    header = frames.parse_request_header(payload, flexible=flexible)
    acks, offset = produce_acks(payload, header.size, version)
    assert acks == -1
    for cut in range(len(payload)):
        truncated = payload[:cut]
        try:
            h = frames.parse_request_header(truncated, flexible=flexible)
            got, at = produce_acks(truncated, h.size, version)
        except CodecError:
            assert cut < offset + 2, cut  # only a frame cut before the end of acks is refused
            continue
        assert (got, at) == (acks, offset), cut  # cut after acks: the rest is the upstream's to judge


def test_produce_acks_with_a_transactional_id_running_past_the_frame() -> None:
    for version, tid in ((3, struct.pack(">h", 30) + b"short"), (9, bytes([31]) + b"short")):
        header = struct.pack(">hhih", 0, version, 1, 1) + b"c" + (b"\x00" if version >= 9 else b"")
        payload = header + tid + struct.pack(">h", 1) * 2
        with pytest.raises(CodecError):
            produce_acks(payload, len(header), version)


def _same_outcome(payload: bytes) -> None:
    """decode_request_body (the server's path) agrees with decode_request, errors included."""
    api_key, version, _ = frames.peek_header(payload)
    try:
        header, body = frames.decode_request(payload)
    except CodecError:
        with pytest.raises(CodecError):
            frames.decode_request_body(payload, api_key, version)
        return
    assert frames.decode_request_body(payload, api_key, version) == (header.client_id, body)


@pytest.mark.parametrize("client_id", [None, "", "client-é"])
@pytest.mark.parametrize(
    ("api_key", "version"), [(12, 0), (12, 3), (12, 4), (11, 5), (11, 9), (8, 7), (8, 9)]
)
def test_decode_request_body_matches_decode_request(
    api_key: int, version: int, client_id: str | None
) -> None:
    cls = m.REQUESTS[api_key]
    payload = frames.encode_request(api_key, version, 7, client_id, cls(group_id="g"))[4:]
    _same_outcome(payload)
    for cut in range(8, len(payload)):  # every truncation: the same error, never a different answer
        _same_outcome(payload[:cut])


def test_decode_request_body_skips_header_tagged_fields_and_rejects_bad_client_ids() -> None:
    body = m.HeartbeatRequest(group_id="g", generation_id=1, member_id="m").encode(4)
    tagged = struct.pack(">hhih", 12, 4, 9, 2) + b"ab" + bytes([1, 5, 3, 1, 2, 3]) + body
    assert frames.decode_request_body(tagged, 12, 4)[0] == "ab"
    _same_outcome(tagged)
    _same_outcome(struct.pack(">hhih", 12, 4, 9, 2) + b"\xff\xfe" + b"\x00" + body)  # not UTF-8
    _same_outcome(struct.pack(">hhih", 12, 4, 9, 2) + bytes([1, 5, 60]) + body)  # tag past the end


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.sampled_from([0, 1, 100, 64 * 1024, 64 * 1024 + 1, 200_000]), min_size=1, max_size=6),
    cuts=st.lists(st.integers(min_value=1, max_value=150_000), min_size=1, max_size=40),
)
def test_any_split_of_small_and_large_frames_yields_them_whole_and_in_order(
    sizes: list[int], cuts: list[int]
) -> None:
    # Large frames arriving over several reads are collected as pieces and joined once: whatever
    # the reads' boundaries, the frames come out as sent and nothing stays buffered.
    payloads = [bytes([i % 251]) * size for i, size in enumerate(sizes)]
    stream = b"".join(frames.frame(p) for p in payloads)
    dec = frames.FrameDecoder()
    out: list[bytes] = []
    pos, i = 0, 0
    while pos < len(stream):
        step = cuts[i % len(cuts)]
        i += 1
        out += dec.feed(stream[pos : pos + step])
        pos += step
        assert dec.buffered == sum(len(f) + 4 for f in payloads[len(out) :]) - (
            len(stream) - min(pos, len(stream))
        )
    assert out == payloads
    assert all(type(f) is bytes for f in out)  # cut out of the reads, never views of them
    assert dec.buffered == 0
