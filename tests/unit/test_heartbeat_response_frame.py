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
from tests.unit.response_frames import assert_encodes_as_generated, int16s, int32s, tags


@settings(max_examples=500, deadline=None)
@given(int32s, int16s, tags, st.integers(0, 4), int32s)
def test_same_frame_or_error_as_the_generated_encoder(
    throttle: int, error: int, tagged: list[tuple[int, bytes]] | None, version: int, correlation: int
) -> None:
    response = m.HeartbeatResponse(throttle_time_ms=throttle, error_code=error, unknown_tagged=tagged)
    assert_encodes_as_generated(ApiKey.HEARTBEAT, version, correlation, response)


@pytest.mark.parametrize("version", range(5))
def test_the_ordinary_answer_reads_back(version: int) -> None:
    response = m.HeartbeatResponse(throttle_time_ms=0, error_code=ErrorCode.REBALANCE_IN_PROGRESS)
    frame = frames.encode_response(ApiKey.HEARTBEAT, version, 77, response)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    correlation, decoded = frames.decode_response(ApiKey.HEARTBEAT, version, frame[4:])
    assert correlation == 77
    assert decoded.error_code == ErrorCode.REBALANCE_IN_PROGRESS
