"""The C OffsetCommit response encoder writes exactly what the generated encoders write.

``frames.encode_response`` uses it for every OffsetCommit answer where the extension is built; it
answers None for what it leaves to the generated encoders (v10, unknown tagged fields, names that
are not ASCII, numbers out of range), so the frame is the same either way. Under
``KCOORD_PURE_PYTHON=1`` the C comparisons skip and the rest checks the pure-Python path.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol.codec import c_offset_commit_response
from kcoord.protocol.messages import ApiKey
from tests.unit.response_frames import (
    INT32,
    assert_encodes_as_generated,
    generic_or_error,
    int16s,
    int32s,
    tags,
)

R = m.OffsetCommitResponse
T = R.OffsetCommitResponseTopic
P = R.OffsetCommitResponsePartition
VERSIONS = range(2, 11)  # what kcoord serves (messages.KCOORD_VERSIONS)

needs_c = pytest.mark.skipif(
    c_offset_commit_response is None, reason="the C extension is not built or KCOORD_PURE_PYTHON=1"
)

names = st.one_of(
    st.text(alphabet=st.characters(max_codepoint=127), max_size=200),
    st.text(max_size=20),  # non-ASCII too: the generated encoder's UTF-8
    st.just("t" * 300),
)


@st.composite
def responses(draw: Any) -> R:
    topics = [
        T(
            name=draw(names),
            partitions=[
                P(partition_index=draw(int32s), error_code=draw(int16s), unknown_tagged=draw(tags))
                for _ in range(draw(st.integers(0, 4)))
            ],
            unknown_tagged=draw(tags),
        )
        for _ in range(draw(st.integers(0, 4)))
    ]
    return R(throttle_time_ms=draw(int32s), topics=topics, unknown_tagged=draw(tags))


@settings(max_examples=400, deadline=None)
@given(responses(), st.sampled_from(VERSIONS), INT32)
def test_encode_response_gives_the_generated_encoders_bytes(
    response: R, version: int, correlation: int
) -> None:
    assert_encodes_as_generated(ApiKey.OFFSET_COMMIT, version, correlation, response)


@needs_c
@settings(max_examples=400, deadline=None)
@given(responses(), st.sampled_from(VERSIONS), INT32)
def test_c_encoder_same_bytes_or_none(response: R, version: int, correlation: int) -> None:
    assert c_offset_commit_response is not None
    frame = c_offset_commit_response(version, correlation, response)
    if frame is not None:
        assert frame == generic_or_error(ApiKey.OFFSET_COMMIT, version, correlation, response)


def commit_answer(name: str = "topic-a", partitions: int = 3, error: int = 0) -> R:
    return R(
        throttle_time_ms=0,
        topics=[T(name=name, partitions=[P(partition_index=i, error_code=error) for i in range(partitions)])],
    )


@needs_c
@pytest.mark.parametrize("version", range(2, 10))
def test_c_encoder_takes_the_ordinary_answer(version: int) -> None:
    """What the shards answer (ASCII names, no tagged fields, v2-v9) is written in C, not handed back."""
    assert c_offset_commit_response is not None
    response = commit_answer()
    frame = c_offset_commit_response(version, 12345, response)
    assert frame is not None
    assert frame == frames.encode_response_generic(ApiKey.OFFSET_COMMIT, version, 12345, response)
    _, decoded = frames.decode_response(ApiKey.OFFSET_COMMIT, version, frame[4:])
    assert decoded == response


@needs_c
@pytest.mark.parametrize(
    "response, version",
    [
        (commit_answer(), 10),  # topic ids
        (commit_answer(name="tøpic"), 9),  # not ASCII
        (commit_answer(name="t" * 0x8000), 7),  # longer than an int16 string holds
        (R(topics=[T(name="t", partitions=[P(partition_index=2**31)])]), 9),  # out of range
        (R(topics=None), 9),  # type: ignore[arg-type]  # not a list
        (R(topics=[T(name="t", unknown_tagged=[(1, b"x")])]), 9),  # unknown tagged fields
    ],
    ids=["v10", "non-ascii", "long-name", "out-of-range", "not-a-list", "tagged"],
)
def test_c_encoder_leaves_the_rest_to_python(response: R, version: int) -> None:
    assert c_offset_commit_response is not None
    assert c_offset_commit_response(version, 1, response) is None


@needs_c
def test_c_encoder_with_a_subclass_that_changes_the_list_while_read() -> None:
    """Attribute reads may run Python code: a list that changes under the encoder hands the
    answer back to Python instead of writing a stale length (and nothing is read freed)."""
    parts = [P(partition_index=i) for i in range(3)]

    class Shrinking(P):
        __slots__ = ()

        @property
        def error_code(self) -> int:
            parts.clear()
            return 0

        @error_code.setter
        def error_code(self, value: int) -> None:
            pass

    parts.append(Shrinking(partition_index=9))
    response = R(topics=[T(name="t", partitions=parts)])
    assert c_offset_commit_response is not None
    assert c_offset_commit_response(9, 1, response) is None
