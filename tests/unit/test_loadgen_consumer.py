"""The KIP-848 load generator member (support/loadgen/consumer_member.py) against canned responses:
which fields each heartbeat carries, what the member owns and reports after an assignment or a
revocation, fencing, and the settled-group checks on both sides."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode as E
from support.loadgen.consumer_member import (
    HEARTBEAT_VERSION,
    ConsumerMember,
    CState,
    Step,
    describe_settled,
    group_settled,
    normalize,
)

R = m.ConsumerGroupHeartbeatResponse
D = m.ConsumerGroupDescribeResponse
T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


def resp(
    epoch: int = 1, assignment: dict[uuid.UUID, list[int]] | None = None, error: int = 0, interval: int = 5000
) -> Any:
    a = None
    if assignment is not None:
        a = R.Assignment(
            topic_partitions=[R.TopicPartitions(topic_id=t, partitions=ps) for t, ps in assignment.items()]
        )
    return R(
        error_code=error, member_id=None, member_epoch=epoch, heartbeat_interval_ms=interval, assignment=a
    )


def owned_field(req: Any) -> dict[uuid.UUID, list[int]] | None:
    if req.topic_partitions is None:
        return None
    return {tp.topic_id: list(tp.partitions) for tp in req.topic_partitions}


def joined(assignment: dict[uuid.UUID, list[int]], epoch: int = 1) -> ConsumerMember:
    """A member that joined, got ``assignment`` and acknowledged it."""
    mb = ConsumerMember(0, "g", ["t"])
    mb.heartbeat_request()
    assert mb.on_heartbeat(resp(epoch, assignment)) is (Step.NOW if any(assignment.values()) else Step.WAIT)
    mb.heartbeat_request()
    assert mb.on_heartbeat(resp(epoch)) is Step.WAIT
    return mb


def test_join_is_a_full_heartbeat_with_empty_owned_partitions() -> None:
    mb = ConsumerMember(3, "g", ["t"], rebalance_timeout_ms=45_000)
    req = mb.heartbeat_request()
    assert (req.group_id, req.member_epoch, req.rebalance_timeout_ms) == ("g", 0, 45_000)
    assert req.member_id == mb.member_id and uuid.UUID(req.member_id)  # v1: the client's own id
    assert req.subscribed_topic_names == ["t"]
    assert req.topic_partitions == []  # Kafka: must be empty (not null) when joining
    assert req.server_assignor is None and req.instance_id is None
    # the request encodes at the version the runtime sends
    assert (
        m.ConsumerGroupHeartbeatRequest.decode(req.encode(HEARTBEAT_VERSION), HEARTBEAT_VERSION).member_epoch
        == 0
    )


def test_assignment_is_taken_and_acknowledged_once_then_heartbeats_are_minimal() -> None:
    mb = ConsumerMember(0, "g", ["t"])
    mb.heartbeat_request()
    assert mb.on_heartbeat(resp(5, {T1: [2, 0], T2: []})) is Step.NOW  # acknowledge at once
    assert mb.state is CState.MEMBER and mb.epoch == 5
    assert mb.partitions() == {(T1, 0), (T1, 2)}
    assert mb.needs_ack and not mb.steady
    ack = mb.heartbeat_request()
    assert owned_field(ack) == {T1: [0, 2]}  # the empty topic is not reported
    assert ack.rebalance_timeout_ms == -1 and ack.subscribed_topic_names is None  # unchanged: null
    assert mb.on_heartbeat(resp(5)) is Step.WAIT
    assert mb.steady
    req = mb.heartbeat_request()
    assert owned_field(req) is None and req.subscribed_topic_names is None and req.member_epoch == 5


def test_revocation_reports_the_smaller_set_then_the_new_epoch_adds() -> None:
    mb = joined({T1: [0, 1, 2, 3]}, epoch=1)
    # the coordinator asks to revoke 2 and 3, at the same epoch
    assert mb.on_heartbeat(resp(1, {T1: [0, 1]})) is Step.NOW
    assert owned_field(mb.heartbeat_request()) == {T1: [0, 1]}
    assert mb.partitions_revoked == 2
    # the answer to the acknowledgement moves it to epoch 2 with a partition of another topic
    assert mb.on_heartbeat(resp(2, {T1: [0, 1], T2: [7]})) is Step.NOW
    assert owned_field(mb.heartbeat_request()) == {T1: [0, 1], T2: [7]}
    assert mb.on_heartbeat(resp(2)) is Step.WAIT
    assert mb.partitions() == {(T1, 0), (T1, 1), (T2, 7)} and mb.reported == mb.owned


def test_same_assignment_again_needs_no_acknowledgement() -> None:
    mb = joined({T1: [0]})
    assert mb.on_heartbeat(resp(2, {T1: [0]})) is Step.WAIT
    assert mb.steady and mb.epoch == 2 and mb.assignments == 1


def test_an_ack_whose_answer_is_lost_is_sent_again_in_a_full_heartbeat() -> None:
    mb = joined({T1: [0]})
    mb.on_heartbeat(resp(1, {T1: [0, 1]}))
    mb.heartbeat_request()  # the acknowledgement
    mb.on_failure()  # ... whose connection failed
    req = mb.heartbeat_request()
    assert owned_field(req) == {T1: [0, 1]}
    assert req.subscribed_topic_names == ["t"] and req.rebalance_timeout_ms != -1  # full
    assert req.member_epoch == 1


@pytest.mark.parametrize("error", [E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID])
def test_fenced_member_loses_everything_and_rejoins_with_the_same_id(error: int) -> None:
    mb = joined({T1: [0, 1]}, epoch=4)
    member_id = mb.member_id
    assert mb.on_heartbeat(resp(error=error)) is Step.NOW
    assert mb.owned == {} and mb.epoch == 0 and mb.state is CState.JOINING and mb.fenced == 1
    req = mb.heartbeat_request()
    assert req.member_epoch == 0 and req.member_id == member_id and req.topic_partitions == []
    assert mb.joins == 2


def test_coordinator_errors_back_off_and_other_errors_stop_the_member() -> None:
    mb = joined({T1: [0]})
    assert mb.on_heartbeat(resp(error=E.NOT_COORDINATOR)) is Step.BACKOFF
    assert mb.heartbeat_request().subscribed_topic_names == ["t"]  # full after the error
    assert mb.on_heartbeat(resp(error=E.GROUP_MAX_SIZE_REACHED)) is Step.STOP
    assert mb.state is CState.STOPPED and "81" in (mb.error or "")


def test_leave_and_commit_requests() -> None:
    mb = ConsumerMember(0, "g", ["t"])
    assert mb.leave_request() is None and mb.commit_request(1) is None  # not in the group yet
    mb = joined({T2: [1], T1: [3, 0]}, epoch=7)
    oc = mb.commit_request(42)
    assert oc is not None and oc.generation_id_or_member_epoch == 7 and oc.member_id == mb.member_id
    assert [(t.topic_id, [p.partition_index for p in t.partitions]) for t in oc.topics] == [
        (T1, [0, 3]),
        (T2, [1]),
    ]
    assert {p.committed_offset for t in oc.topics for p in t.partitions} == {42}
    oc.encode(10)  # topic ids: only v10 can carry them
    leave = mb.leave_request()
    assert leave is not None and leave.member_epoch == -1
    static = joined({T1: [0]})
    static.instance_id = "i-1"
    leave = static.leave_request()
    assert leave is not None and leave.member_epoch == -2 and leave.instance_id == "i-1"


def test_normalize_merges_and_sorts() -> None:
    tps = [
        R.TopicPartitions(topic_id=T1, partitions=[3, 1]),
        R.TopicPartitions(topic_id=T2, partitions=[]),
        R.TopicPartitions(topic_id=T1, partitions=[2]),
    ]
    assert normalize(tps) == {T1: (1, 2, 3)}


def test_group_settled_needs_one_epoch_acks_heard_and_every_partition_once() -> None:
    a, b = joined({T1: [0, 1]}, epoch=3), joined({T1: [2]}, epoch=3)
    assert group_settled([a, b], 3)
    assert not group_settled([a, b], 4)  # a partition nobody owns
    c = joined({T1: [2]}, epoch=3)
    assert not group_settled([a, b, c], 3)  # partition 2 owned twice
    b.on_heartbeat(resp(4))
    assert not group_settled([a, b], 3)  # epochs differ
    a.on_heartbeat(resp(4, {T1: [0]}))
    b.on_heartbeat(resp(4, {T1: [1, 2]}))
    assert not group_settled([a, b], 3)  # the revocation and the new partition are not reported yet
    for mb in (a, b):
        mb.heartbeat_request()
        mb.on_heartbeat(resp(4))
    assert group_settled([a, b], 3)


def described(
    group_epoch: int, assignment_epoch: int, members: list[tuple[int, list[int], list[int]]]
) -> Any:
    def asg(ps: list[int]) -> Any:
        return D.Assignment(topic_partitions=[D.TopicPartitions(topic_id=T1, topic_name="t", partitions=ps)])

    return D.DescribedGroup(
        group_id="g",
        group_state="Stable",
        group_epoch=group_epoch,
        assignment_epoch=assignment_epoch,
        members=[
            D.Member(member_id=f"m{i}", member_epoch=e, assignment=asg(a), target_assignment=asg(t))
            for i, (e, a, t) in enumerate(members)
        ],
    )


def test_describe_settled() -> None:
    assert describe_settled(described(5, 5, [(5, [0], [0]), (5, [1], [1])]), 2) is None
    assert "behind" in (describe_settled(described(6, 5, [(5, [0], [0]), (5, [1], [1])]), 2) or "")
    assert "expected 3" in (describe_settled(described(5, 5, [(5, [0], [0]), (5, [1], [1])]), 3) or "")
    assert "epoch 4" in (describe_settled(described(5, 5, [(4, [0], [0]), (5, [1], [1])]), 2) or "")
    assert "target" in (describe_settled(described(5, 5, [(5, [0, 1], [0]), (5, [], [1])]), 2) or "")
    err = D.DescribedGroup(group_id="g", error_code=E.GROUP_ID_NOT_FOUND, error_message="no such group")
    assert "no such group" in (describe_settled(err, 1) or "")


def test_stats_timeline_shows_which_seconds_were_slow() -> None:
    from support.loadgen.conn import Stats

    s = Stats(timeline_api=68)
    s.response(68, 0.001)
    s.response(68, 0.002)
    s.window_start -= 3.0  # three seconds later
    s.response(68, 0.250)
    s.response(8, 9.0)  # another API: not in the timeline
    t = s.snapshot(5.0)["timeline"]
    assert t["seconds"] == 2 and t["seconds_max_over_100ms"] == 1
    assert t["worst_seconds"] == [
        {"second": 0, "responses": 2, "max_ms": 2.0},
        {"second": 3, "responses": 1, "max_ms": 250.0},
    ]
    s.reset()
    assert s.snapshot(1.0)["timeline"]["seconds"] == 0
    assert "timeline" not in Stats().snapshot(1.0)
