"""What the tests of kcoord's fast response encoders share: field values (mostly in range, now and
then one past a bound, which the generated encoder refuses), and the check that
``frames.encode_response`` gives the generated encoder's frame, or raises its error."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

from kcoord.protocol import frames
from kcoord.protocol.codec import Message

INT32 = st.integers(-(2**31), 2**31 - 1)
INT16 = st.integers(-(2**15), 2**15 - 1)
int32s = st.one_of(INT32, INT32, INT32, st.sampled_from([2**31, -(2**31) - 1]))
int16s = st.one_of(INT16, INT16, INT16, st.sampled_from([2**15, -(2**15) - 1]))
tags: st.SearchStrategy[list[tuple[int, bytes]] | None] = st.one_of(
    st.none(), st.just([]), st.just([(5, b"\x01\x02")])
)


def generic_or_error(
    api_key: int, version: int, correlation_id: int, response: Message
) -> bytes | type[Exception]:
    """The generated encoder's frame, or the type of the error it raises."""
    try:
        return frames.encode_response_generic(api_key, version, correlation_id, response)
    except Exception as exc:
        return type(exc)


def assert_encodes_as_generated(api_key: int, version: int, correlation_id: int, response: Message) -> None:
    """``frames.encode_response`` (fast paths included) gives the generated encoder's frame or error."""
    expected = generic_or_error(api_key, version, correlation_id, response)
    if isinstance(expected, bytes):
        assert frames.encode_response(api_key, version, correlation_id, response) == expected
    else:
        with pytest.raises(expected):
            frames.encode_response(api_key, version, correlation_id, response)
