"""A Heartbeat answer packed in one call is the frame the generated encoder writes.

``frames.encode_response`` packs HeartbeatResponse v1-v4 itself (one per member every few seconds);
v0, unknown tagged fields and fields out of range go to the generated encoder, so the bytes, or the
error, are the same either way.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey

INT32 = st.integers(-(2**31), 2**31 - 1)
INT16 = st.integers(-(2**15), 2**15 - 1)
# Mostly in range; now and then one past a bound, which the generated encoder refuses.
int32s = st.one_of(INT32, INT32, INT32, st.sampled_from([2**31, -(2**31) - 1]))
int16s = st.one_of(INT16, INT16, INT16, st.sampled_from([2**15, -(2**15) - 1]))
tags = st.one_of(st.none(), st.just([]), st.just([(5, b"\x01\x02")]))


def generic_or_error(
    version: int, correlation_id: int, response: m.HeartbeatResponse
) -> bytes | type[Exception]:
    try:
        return frames.encode_response_generic(ApiKey.HEARTBEAT, version, correlation_id, response)
    except Exception as exc:
        return type(exc)


@settings(max_examples=500, deadline=None)
@given(int32s, int16s, tags, st.integers(0, 4), int32s)
def test_same_frame_or_error_as_the_generated_encoder(
    throttle: int, error: int, tagged: list[tuple[int, bytes]] | None, version: int, correlation: int
) -> None:
    response = m.HeartbeatResponse(throttle_time_ms=throttle, error_code=error, unknown_tagged=tagged)
    expected = generic_or_error(version, correlation, response)
    if isinstance(expected, bytes):
        assert frames.encode_response(ApiKey.HEARTBEAT, version, correlation, response) == expected
    else:
        with pytest.raises(expected):
            frames.encode_response(ApiKey.HEARTBEAT, version, correlation, response)


@pytest.mark.parametrize("version", range(5))
def test_the_ordinary_answer_reads_back(version: int) -> None:
    response = m.HeartbeatResponse(throttle_time_ms=0, error_code=ErrorCode.REBALANCE_IN_PROGRESS)
    frame = frames.encode_response(ApiKey.HEARTBEAT, version, 77, response)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    correlation, decoded = frames.decode_response(ApiKey.HEARTBEAT, version, frame[4:])
    assert correlation == 77
    assert decoded.error_code == ErrorCode.REBALANCE_IN_PROGRESS
