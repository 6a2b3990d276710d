"""Large multi-group requests decoded in steps: the same objects as at once, the same inputs
refused (protocol/request_steps.py), served in request order on a connection (net/dispatch.py)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.coordinator.net.dispatch import _STEPPED_REQUESTS
from kcoord.protocol import codec, frames
from kcoord.protocol import messages as m
from kcoord.protocol.messages import KCOORD_VERSIONS, REQUESTS
from kcoord.protocol.primitives import CodecError
from kcoord.protocol.request_steps import stepped_request
from tests.unit.test_codec_roundtrip import canon, message_strategy

pytestmark = pytest.mark.skipif(
    codec.DECODER_BACKEND != "c", reason="requests are decoded in steps only by the C decoder"
)


def opening_field(api_key: int, version: int) -> str | None:
    first = next(f for f in REQUESTS[api_key].SCHEMA.fields if f.present_in(version))
    return first.name if first.is_array else None


# Every (api, version) kcoord serves that dispatch.py may decode in steps and that opens with an array.
CASES = [
    (api_key, version)
    for api_key in sorted(_STEPPED_REQUESTS)
    for version in range(KCOORD_VERSIONS[api_key][0], KCOORD_VERSIONS[api_key][1] + 1)
    if opening_field(api_key, version) is not None
]


def decode_in_steps(frame: bytes, api_key: int, version: int, count: int) -> tuple[str | None, m.Message]:
    stepped = stepped_request(frame, api_key, version, 0)
    assert stepped is not None
    while not stepped.done:
        stepped.step(count)
    return stepped.client_id, stepped.message()


def test_every_multi_group_api_is_covered() -> None:
    assert {api_key for api_key, _ in CASES} == set(_STEPPED_REQUESTS)
    # OffsetFetch opens with its groups from v8; before that it names one group and is decoded at once.
    assert stepped_request(request_frame(m.OffsetFetchRequest(group_id="g", topics=[]), 7), 9, 7, 0) is None


def request_frame(request: m.Message, version: int, client_id: str | None = "client") -> bytes:
    return frames.encode_request(request.SCHEMA.api_key, version, 7, client_id, request)[4:]


@pytest.mark.parametrize(("api_key", "version"), CASES, ids=lambda v: str(v))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), count=st.sampled_from([1, 3, 500, 5000]), repeat=st.sampled_from([1, 70, 300]))
def test_stepped_request_is_the_request_decoded_at_once(
    api_key: int, version: int, data: st.DataObject, count: int, repeat: int
) -> None:
    cls = REQUESTS[api_key]
    field = opening_field(api_key, version)
    assert field is not None
    request = data.draw(message_strategy(cls, version))
    # Repeated so that the array's length takes more than one byte (compact lengths over 127).
    entries = getattr(request, field) or []
    setattr(request, field, entries * repeat)
    frame = request_frame(request, version)
    at_once = frames.decode_request_body(frame, api_key, version)
    if not entries:
        assert stepped_request(frame, api_key, version, 0) is None
        return
    client_id, stepped = decode_in_steps(frame, api_key, version, count)
    assert client_id == at_once[0]
    assert canon(stepped) == canon(at_once[1])


@pytest.mark.parametrize("cut", [1, 2, 7, 100, 5000])
def test_truncated_and_malformed_frames_are_refused_as_at_once(cut: int) -> None:
    request = m.DescribeGroupsRequest(
        groups=[f"group-{i}" for i in range(3000)], include_authorized_operations=True
    )
    frame = request_frame(request, 5)
    short = frame[: len(frame) - cut]
    with pytest.raises(CodecError):
        frames.decode_request_body(short, m.ApiKey.DESCRIBE_GROUPS, 5)
    with pytest.raises(CodecError):
        decode_in_steps(short, m.ApiKey.DESCRIBE_GROUPS, 5, 500)
    # Bytes after the message are ignored by both (decode_request_body reads the message and stops).
    longer = frame + b"\0"
    assert decode_in_steps(longer, m.ApiKey.DESCRIBE_GROUPS, 5, 500)[1] == request
    assert frames.decode_request_body(longer, m.ApiKey.DESCRIBE_GROUPS, 5)[1] == request


def test_a_count_larger_than_the_frame_is_refused_before_any_step() -> None:
    frame = bytearray(request_frame(m.DescribeGroupsRequest(groups=["a"] * 2000), 5))
    body = frames.client_id_and_body_start(bytes(frame), True)[1]
    frame[body : body + 3] = b"\xff\xff\x7f"  # a compact length of ~2 million
    with pytest.raises(CodecError):
        stepped_request(bytes(frame), m.ApiKey.DESCRIBE_GROUPS, 5, 0)


def test_short_arrays_are_decoded_at_once() -> None:
    frame = request_frame(m.DescribeGroupsRequest(groups=["a"] * 1000), 5)
    assert stepped_request(frame, m.ApiKey.DESCRIBE_GROUPS, 5, 1000) is None
    assert stepped_request(frame, m.ApiKey.DESCRIBE_GROUPS, 5, 999) is not None
