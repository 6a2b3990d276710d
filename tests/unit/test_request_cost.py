"""The estimated memory of a request in flight (net/request_cost.py), from its frame alone."""

from __future__ import annotations

import pytest

from kcoord.coordinator.net.request_cost import DECODED_PER_FRAME_BYTE, PER_GROUP, PER_REQUEST, request_cost
from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol.messages import ApiKey


def payload(api_key: int, version: int, request: m.Message) -> bytes:
    return frames.encode_request(api_key, version, 7, "client", request)[4:]


@pytest.mark.parametrize("version", [0, 4, 5, 6])  # v5+ flexible: a compact array
def test_a_describe_groups_costs_per_group_named(version: int) -> None:
    ids = [f"g{i}" for i in range(20_000)]
    frame = payload(ApiKey.DESCRIBE_GROUPS, version, m.DescribeGroupsRequest(groups=ids))
    assert frames.peek_first_array_length(frame, ApiKey.DESCRIBE_GROUPS, version) == 20_000
    cost = request_cost(frame, ApiKey.DESCRIBE_GROUPS, version)
    assert cost == PER_REQUEST + len(frame) * DECODED_PER_FRAME_BYTE + 20_000 * PER_GROUP


def test_offset_fetch_counts_groups_only_where_it_has_a_groups_array() -> None:
    R = m.OffsetFetchRequest
    multi = R(groups=[R.OffsetFetchRequestGroup(group_id=f"g{i}", topics=None) for i in range(300)])
    frame = payload(ApiKey.OFFSET_FETCH, 8, multi)
    assert request_cost(frame, ApiKey.OFFSET_FETCH, 8) == PER_REQUEST + len(frame) * 8 + 300 * PER_GROUP
    single = payload(ApiKey.OFFSET_FETCH, 7, R(group_id="g", topics=None))
    assert request_cost(single, ApiKey.OFFSET_FETCH, 7) == PER_REQUEST + len(single) * 8


def test_a_heartbeat_is_cheap_and_a_relayed_request_costs_only_its_bookkeeping() -> None:
    heartbeat = payload(ApiKey.HEARTBEAT, 4, m.HeartbeatRequest(group_id="g", generation_id=1, member_id="m"))
    assert request_cost(heartbeat, ApiKey.HEARTBEAT, 4) < 2048
    produce = frames.frame(b"\x00\x00\x00\x09\x00\x00\x00\x01\xff\xff" + b"r" * 1_000_000)[4:]
    assert request_cost(produce, ApiKey.PRODUCE, 9) == PER_REQUEST


def test_an_array_length_past_the_frame_is_bounded_by_the_frame() -> None:
    frame = payload(ApiKey.DESCRIBE_GROUPS, 4, m.DescribeGroupsRequest(groups=["g"]))
    body = len(frame) - 4 - 1  # the groups array's int32 count sits before its one entry and the bool
    lying = frame[: body - 2] + b"\x7f\xff\xff\xff" + frame[body + 2 :]
    assert frames.peek_first_array_length(lying, ApiKey.DESCRIBE_GROUPS, 4) <= len(lying)
    null = payload(ApiKey.DESCRIBE_GROUPS, 4, m.DescribeGroupsRequest(groups=[]))
    assert frames.peek_first_array_length(null, ApiKey.DESCRIBE_GROUPS, 4) == 0
