"""Multi-group requests naming thousands of groups, decoded in steps (protocol/request_steps.py),
against a real kcoord: answered right and in request order behind and ahead of small requests on
the same connection, and a malformed one closes only its own connection, with a log line."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kcoord.protocol import frames
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey
from support.hostile_clients import connect, read_frame
from support.kcoord_process import KcoordProcess
from support.loadgen.admin import create_topic
from tests.support.wire import WireClient, commit_offset

pytestmark = pytest.mark.integration

TOPIC = "large-requests-topic"
REAL = "large-requests-real-group"
IDS = 5000  # well over dispatch.DECODE_IN_STEPS_ABOVE


@pytest.fixture(scope="module")
def kcoord() -> Iterator[KcoordProcess]:
    with KcoordProcess("--storage", "memory") as proc:
        assert create_topic(proc.bootstrap, TOPIC, 1) in ("created", "exists")
        yield proc


def ids(prefix: str, real_at: int | None = None) -> list[str]:
    names = [f"{prefix}-{i:05d}" for i in range(IDS)]
    if real_at is not None:
        names[real_at] = REAL
    return names


def test_pipelined_large_and_small_requests_are_answered_in_order(kcoord: KcoordProcess) -> None:
    assert commit_offset(kcoord.bootstrap, REAL, TOPIC, 42) == 0
    requests: list[tuple[int, int, m.Message]] = [
        (ApiKey.DESCRIBE_GROUPS, 5, m.DescribeGroupsRequest(groups=ids("described", real_at=4321))),
        (ApiKey.HEARTBEAT, 4, m.HeartbeatRequest(group_id="nobody", generation_id=1, member_id="x")),
        (
            ApiKey.OFFSET_FETCH,
            8,
            m.OffsetFetchRequest(
                groups=[
                    m.OffsetFetchRequest.OffsetFetchRequestGroup(group_id=g, topics=None)
                    for g in ids("fetched", 17)
                ]
            ),
        ),
        (ApiKey.DESCRIBE_GROUPS, 5, m.DescribeGroupsRequest(groups=[REAL])),
        (ApiKey.DELETE_GROUPS, 2, m.DeleteGroupsRequest(groups_names=ids("deleted"))),
        (ApiKey.CONSUMER_GROUP_DESCRIBE, 0, m.ConsumerGroupDescribeRequest(group_ids=ids("cgd"))),
    ]
    sock = connect(kcoord.bootstrap)
    try:
        sock.sendall(b"".join(
            frames.encode_request(api_key, version, correlation_id, "large", request)
            for correlation_id, (api_key, version, request) in enumerate(requests)
        ))  # fmt: skip
        answers = [
            frames.decode_response(api_key, version, read_frame(sock)) for api_key, version, _ in requests
        ]
    finally:
        sock.close()
    assert [correlation_id for correlation_id, _ in answers] == list(range(len(requests)))
    described = answers[0][1]
    assert [g.group_id for g in described.groups] == ids("described", real_at=4321)
    assert described.groups[4321].group_state == "Empty"  # it has offsets, no members
    assert {g.group_state for i, g in enumerate(described.groups) if i != 4321} == {"Dead"}
    assert answers[1][1].error_code == ErrorCode.UNKNOWN_MEMBER_ID
    fetched = answers[2][1]
    assert [g.group_id for g in fetched.groups] == ids("fetched", 17)
    real = fetched.groups[17]
    assert [(t.name, [p.committed_offset for p in t.partitions]) for t in real.topics] == [(TOPIC, [42])]
    assert all(not g.topics for i, g in enumerate(fetched.groups) if i != 17)
    assert answers[3][1].groups[0].group_state == "Empty"
    deleted = answers[4][1]
    assert [r.group_id for r in deleted.results] == ids("deleted")
    assert {r.error_code for r in deleted.results} == {ErrorCode.GROUP_ID_NOT_FOUND}
    assert [g.group_id for g in answers[5][1].groups] == ids("cgd")


def test_a_malformed_large_request_closes_only_its_connection(kcoord: KcoordProcess) -> None:
    framed = frames.encode_request(
        ApiKey.DESCRIBE_GROUPS, 5, 1, "bad", m.DescribeGroupsRequest(groups=ids("bad"))
    )
    payload = bytearray(framed[4:])
    payload[len(payload) // 2] = 0xFF  # a length byte in the middle of the ids: runs past the frame
    with WireClient(kcoord.bootstrap) as bad:
        bad.send_bytes(frames.frame(bytes(payload)))
        assert bad.is_closed_by_server()
    with WireClient(kcoord.bootstrap) as other:
        answer = other.request(ApiKey.DESCRIBE_GROUPS, 5, m.DescribeGroupsRequest(groups=ids("good")))
        assert len(answer.groups) == IDS
    assert "malformed request" in kcoord.log_tail(200)
