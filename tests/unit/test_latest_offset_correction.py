"""ListOffsets LATEST raised to the high watermark (relay/latest_offsets.py): only LATEST, only up."""

from __future__ import annotations

import asyncio

from kcoord.coordinator.net.relay.latest_offsets import corrected, latest_partitions
from kcoord.protocol import frames
from kcoord.protocol import storage_messages as sm
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey

L = sm.ListOffsetsRequest
R = sm.ListOffsetsResponse
VERSION = 7


def request_frame() -> bytes:
    request = L(
        replica_id=-1,
        isolation_level=0,
        topics=[
            L.ListOffsetsTopic(
                name="t",
                partitions=[
                    L.ListOffsetsPartition(partition_index=0, timestamp=-1),  # LATEST
                    L.ListOffsetsPartition(partition_index=1, timestamp=-2),  # EARLIEST
                    L.ListOffsetsPartition(partition_index=2, timestamp=-1),
                ],
            )
        ],
    )
    return frames.encode_request(ApiKey.LIST_OFFSETS, VERSION, 42, "c", request)[4:]


def response_frame(offsets: dict[int, tuple[int, int]]) -> bytes:
    partitions = [
        R.ListOffsetsPartitionResponse(partition_index=i, error_code=e, timestamp=-1, offset=o)
        for i, (o, e) in offsets.items()
    ]
    response = R(topics=[R.ListOffsetsTopicResponse(name="t", partitions=partitions)])
    return sm.encode_response(VERSION, 42, response)[4:]


def test_only_latest_partitions_are_asked_and_raised_never_lowered() -> None:
    wanted = latest_partitions(request_frame(), VERSION)
    assert wanted == [("t", 0), ("t", 2)]
    asked: list[dict[tuple[str, int], int]] = []

    async def marks(offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        asked.append(offsets)
        return {("t", 0): 15, ("t", 2): 3}  # partition 2's answer is already past it

    raw = response_frame({0: (11, ErrorCode.NONE), 1: (0, ErrorCode.NONE), 2: (7, ErrorCode.NONE)})
    out = asyncio.run(corrected(raw, VERSION, wanted, marks))
    correlation_id, response = sm.decode_response(R, VERSION, out[4:])
    assert correlation_id == 42
    assert [p.offset for p in response.topics[0].partitions] == [15, 0, 7]
    assert asked == [{("t", 0): 11, ("t", 2): 7}]


def test_a_partition_answered_with_an_error_is_left_alone() -> None:
    async def marks(offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        raise AssertionError(f"no Fetch for partitions in error: {offsets}")

    raw = response_frame({0: (-1, ErrorCode.NOT_LEADER_OR_FOLLOWER)})
    out = asyncio.run(corrected(raw, VERSION, [("t", 0)], marks))
    assert sm.decode_response(R, VERSION, out[4:])[1].topics[0].partitions[0].offset == -1


def test_a_version_kcoord_does_not_read_is_relayed_as_it_came() -> None:
    assert latest_partitions(b"\x00\x02\x00\x00", 0) == []
