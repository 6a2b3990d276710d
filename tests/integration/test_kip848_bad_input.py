"""Bad input for the KIP-848 APIs, over the wire to a real kcoord.

Each request gets the error code a Kafka 4.x broker gives it, and afterwards two healthy members
-- one in the group the bad requests aim at, one in another group -- still heartbeat with the
epoch and partitions they had, and the server logged no traceback.

Kafka's behaviour, as read in apache/kafka:
- ``GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid`` (in 4.0 and earlier
  ``GroupMetadataManager``): empty MemberId (v1+, or epoch > 0 or -1), empty GroupId, InstanceId or
  RackId, a join (epoch 0) without RebalanceTimeoutMs, with TopicPartitions null or not empty, or
  with neither SubscribedTopicNames nor SubscribedTopicRegex -> INVALID_REQUEST; epoch -2 without an
  InstanceId -> INVALID_REQUEST "InstanceId can't be null."; epoch < -2 -> INVALID_REQUEST
  "MemberEpoch is invalid."; a ServerAssignor not in group.consumer.assignors -> UNSUPPORTED_ASSIGNOR.
  Nothing else is checked: no limit on the member id's length, on the number of subscribed topic
  names, on a positive or negative RebalanceTimeoutMs other than -1, and names and a regex may be
  set together (the member subscribes to both: ``ConsumerGroup.computeSubscribedTopicNames``).
- ``GroupMetadataManager.throwIfConsumerGroupMemberEpochIsInvalid``: an epoch above the member's, or
  below it and not its previous epoch with owned partitions it is assigned -> FENCED_MEMBER_EPOCH.
- ``getOrMaybeCreateConsumerGroup``: a heartbeat (epoch != 0) or leave to a group that does not exist
  -> GROUP_ID_NOT_FOUND; ``ConsumerGroup.getOrMaybeCreateMember``: an unknown member id with an epoch
  other than 0 -> UNKNOWN_MEMBER_ID; ``throwIfStaticMemberIsUnknown``: epoch -2 with an instance id
  no member holds -> UNKNOWN_MEMBER_ID "Instance id <id> is unknown.".
- ``throwIfRegularExpressionIsInvalid``: a SubscribedTopicRegex that com.google.re2j.Pattern does not
  compile -> INVALID_REGULAR_EXPRESSION, before any record is written.
- Generated message readers (``MessageDataGenerator``): a string longer than 0x7fff bytes is a
  parse error ("string field groupId had invalid length"), so the broker closes the connection.
- ``KafkaApis`` OffsetCommit v10 (KafkaApisTest ``testHandleOffsetCommitRequestTopicsAndPartitionsValidation``):
  a topic id the metadata cache does not know -> UNKNOWN_TOPIC_ID for each of its partitions, the
  rest is committed. OffsetFetch v10: the same answer per partition (kcoord's
  test_offsets_by_topic_id), offset -1.
- ``GroupMetadataManager.consumerGroupDescribe``: an unknown group -> GROUP_ID_NOT_FOUND
  "Group <id> not found.".
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode as E
from support.broker import TansuBroker
from support.kcoord_process import KcoordProcess
from support.workload import create_topic, unique
from tests.support.wire import WireClient

pytestmark = pytest.mark.integration

CGH, CGD, OFFSET_COMMIT, OFFSET_FETCH = 68, 69, 8, 9
REQ = m.ConsumerGroupHeartbeatRequest
PARTITIONS = 4


@dataclass
class Env:
    kcoord: KcoordProcess
    topic: str
    topic_id: uuid.UUID
    other_topic: str
    other_topic_id: uuid.UUID
    members: dict[str, Healthy] = field(default_factory=dict)
    group_epochs_moved: bool = False  # set by a test whose legitimate requests bump the target group's epoch


@dataclass
class Healthy:
    """A member that joined and owns every partition of the topic in its own group."""

    group: str
    member_id: str
    epoch: int
    owned: dict[uuid.UUID, set[int]]


def heartbeat(address: str, version: int = 1, **fields: Any) -> Any:
    with WireClient(address) as client:
        return client.request(CGH, version, REQ(**fields))


def join_request(group: str, member_id: str, **fields: Any) -> dict[str, Any]:
    return {"group_id": group, "member_id": member_id, "member_epoch": 0, "rebalance_timeout_ms": 30_000,
            "subscribed_topic_names": [], "topic_partitions": [], **fields}  # fmt: skip


def assigned(response: Any) -> dict[uuid.UUID, set[int]]:
    assert response.assignment is not None, response
    return {tp.topic_id: set(tp.partitions) for tp in response.assignment.topic_partitions}


def owned_field(owned: dict[uuid.UUID, set[int]]) -> list[Any]:
    return [REQ.TopicPartitions(topic_id=t, partitions=sorted(ps)) for t, ps in owned.items()]


def full_heartbeat(address: str, member: Healthy, topic: str) -> Any:
    """The full request a client sends after an error: every field, so the answer has the assignment."""
    return heartbeat(address, group_id=member.group, member_id=member.member_id, member_epoch=member.epoch,
                     rebalance_timeout_ms=30_000, subscribed_topic_names=[topic],
                     topic_partitions=owned_field(member.owned))  # fmt: skip


def describe(address: str, group: str) -> Any:
    with WireClient(address) as client:
        return client.request(CGD, 1, m.ConsumerGroupDescribeRequest(group_ids=[group])).groups[0]


@pytest.fixture(scope="module")
def env(tansu: TansuBroker) -> Iterator[Env]:
    with KcoordProcess("--shards", "3", "--storage", "kafka", "--internal-topic", unique("__kcoord_848bad"),
                       bootstrap=tansu.bootstrap) as proc:  # fmt: skip
        topic, other = unique("bad848"), unique("bad848-other")
        create_topic(proc.bootstrap, topic, PARTITIONS)
        create_topic(proc.bootstrap, other, 2)
        ids = {}
        with WireClient(proc.bootstrap) as client:
            T = m.MetadataRequest.MetadataRequestTopic
            answer = client.request(3, 12, m.MetadataRequest(topics=[T(name=topic), T(name=other)]))
            ids = {t.name: t.topic_id for t in answer.topics}
        env = Env(proc, topic, ids[topic], other, ids[other])
        for role in ("same", "other"):  # "same": the group the bad requests aim at
            group, member_id = unique(f"bad848-{role}"), str(uuid.uuid4())
            joined = heartbeat(
                proc.bootstrap, **join_request(group, member_id, subscribed_topic_names=[topic])
            )
            assert joined.error_code == 0, joined
            owned = assigned(joined)
            assert owned == {env.topic_id: set(range(PARTITIONS))}, owned
            env.members[role] = Healthy(group, member_id, joined.member_epoch, owned)
        yield env


@pytest.fixture(autouse=True)
def healthy_afterwards(env: Env) -> Iterator[None]:
    """After each test: both healthy members heartbeat with the epoch and partitions they had, the
    target group's epochs did not move, kcoord is alive and logged no traceback."""
    address = env.kcoord.bootstrap
    same = env.members["same"]
    before = describe(address, same.group)
    start = len(env.kcoord.log_path.read_text(errors="replace"))
    yield
    for role, member in env.members.items():
        response = full_heartbeat(address, member, env.topic)
        assert (response.error_code, response.error_message) == (0, None), (role, response)
        assert response.member_epoch == member.epoch, (role, response)
        assert assigned(response) == member.owned, (role, response)
    after = describe(address, same.group)
    if not env.group_epochs_moved:
        assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
    env.group_epochs_moved = False
    assert [(mb.member_id, mb.member_epoch) for mb in after.members] == [(same.member_id, same.epoch)]
    assert {
        tp.topic_id: set(tp.partitions) for tp in after.members[0].assignment.topic_partitions
    } == same.owned
    assert env.kcoord.alive
    new_log = env.kcoord.log_path.read_text(errors="replace")[start:]
    assert "Traceback" not in new_log and "level=ERROR" not in new_log, new_log[-4000:]


# -- epochs and members -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("epoch", [2, 1_000_000, 2**31 - 1])
def test_an_epoch_above_the_members_is_fenced(env: Env, epoch: int) -> None:
    same = env.members["same"]
    epoch = max(epoch, same.epoch + 1)
    response = heartbeat(
        env.kcoord.bootstrap, group_id=same.group, member_id=same.member_id, member_epoch=epoch
    )
    assert response.error_code == E.FENCED_MEMBER_EPOCH, response
    assert f"greater member epoch ({epoch})" in (response.error_message or "")


@pytest.mark.parametrize("epoch", [-3, -100, -(2**31)])
@pytest.mark.parametrize("who", ["the member", "a stranger"])
def test_a_negative_epoch_other_than_leave_is_invalid(env: Env, epoch: int, who: str) -> None:
    same = env.members["same"]
    member_id = same.member_id if who == "the member" else str(uuid.uuid4())
    response = heartbeat(env.kcoord.bootstrap, group_id=same.group, member_id=member_id, member_epoch=epoch)
    assert (response.error_code, response.error_message) == (E.INVALID_REQUEST, "MemberEpoch is invalid.")


@pytest.mark.parametrize("epoch", [1, 7, -1])
def test_an_unknown_member_id(env: Env, epoch: int) -> None:
    same = env.members["same"]
    stranger = str(uuid.uuid4())
    response = heartbeat(env.kcoord.bootstrap, group_id=same.group, member_id=stranger, member_epoch=epoch)
    assert (response.error_code, response.error_message) == (
        E.UNKNOWN_MEMBER_ID, f"Member {stranger} is not a member of group {same.group}."
    )  # fmt: skip
    missing = unique("bad848-nogroup")
    response = heartbeat(env.kcoord.bootstrap, group_id=missing, member_id=stranger, member_epoch=epoch)
    assert response.error_code == E.GROUP_ID_NOT_FOUND, response


def test_owned_partitions_of_topic_ids_that_do_not_exist_change_nothing(env: Env) -> None:
    """A stable member's owned partitions are not reconciled (Kafka's ``maybeReconcile`` returns a
    member already reconciled to the target epoch as it is), so made-up topic ids are ignored."""
    same = env.members["same"]
    bogus = {**same.owned, uuid.uuid4(): {0, 1}}
    response = heartbeat(env.kcoord.bootstrap, group_id=same.group, member_id=same.member_id,
                         member_epoch=same.epoch, topic_partitions=owned_field(bogus))  # fmt: skip
    assert response.error_code == 0 and response.member_epoch == same.epoch, response


def test_a_join_that_claims_to_own_partitions_is_invalid(env: Env) -> None:
    same = env.members["same"]
    response = heartbeat(env.kcoord.bootstrap, **join_request(same.group, str(uuid.uuid4()),
                         topic_partitions=owned_field(same.owned)))  # fmt: skip
    assert (response.error_code, response.error_message) == (
        E.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."
    )  # fmt: skip


# -- static members ---------------------------------------------------------------------------------------------
def test_a_static_leave_for_an_instance_id_nobody_holds(env: Env) -> None:
    same = env.members["same"]
    response = heartbeat(env.kcoord.bootstrap, group_id=same.group, member_id=str(uuid.uuid4()), member_epoch=-2,
                         instance_id="ghost")  # fmt: skip
    assert (response.error_code, response.error_message) == (
        E.UNKNOWN_MEMBER_ID,
        "Instance id ghost is unknown.",
    )
    response = heartbeat(env.kcoord.bootstrap, group_id=unique("bad848-nogroup"), member_id=str(uuid.uuid4()),
                         member_epoch=-2, instance_id="ghost")  # fmt: skip
    assert response.error_code == E.GROUP_ID_NOT_FOUND, response


def test_a_static_leave_without_an_instance_id_is_invalid(env: Env) -> None:
    same = env.members["same"]
    response = heartbeat(env.kcoord.bootstrap, group_id=same.group, member_id=same.member_id, member_epoch=-2)
    assert (response.error_code, response.error_message) == (E.INVALID_REQUEST, "InstanceId can't be null.")


def test_a_static_heartbeat_with_the_healthy_members_id_is_not_its_instance(env: Env) -> None:
    """The healthy member is dynamic: a heartbeat naming an instance id with its member id is a
    static member nobody holds (UNKNOWN_MEMBER_ID), not a way to take the member over."""
    same = env.members["same"]
    response = heartbeat(env.kcoord.bootstrap, group_id=same.group, member_id=same.member_id,
                         member_epoch=same.epoch, instance_id="intruder")  # fmt: skip
    assert (response.error_code, response.error_message) == (
        E.UNKNOWN_MEMBER_ID,
        "Instance id intruder is unknown.",
    )


# -- required fields --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("version", "fields", "message"),
    [
        (1, {"member_id": ""}, "MemberId can't be empty."),
        (0, {"member_id": "", "member_epoch": 3}, "MemberId can't be empty."),
        (0, {"member_id": "", "member_epoch": -1}, "MemberId can't be empty."),
        (1, {"group_id": ""}, "GroupId can't be empty."),
        (1, {"instance_id": ""}, "InstanceId can't be empty."),
        (1, {"rack_id": ""}, "RackId can't be empty."),
        (1, {"rebalance_timeout_ms": -1}, "RebalanceTimeoutMs must be provided in first request."),
        (1, {"topic_partitions": None}, "TopicPartitions must be empty when (re-)joining."),
        (1, {"subscribed_topic_names": None},
         "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
    ],
)  # fmt: skip
def test_missing_or_empty_fields_are_invalid(
    env: Env, version: int, fields: dict[str, Any], message: str
) -> None:
    same = env.members["same"]
    response = heartbeat(
        env.kcoord.bootstrap, version, **{**join_request(same.group, str(uuid.uuid4())), **fields}
    )
    assert (response.error_code, response.error_message) == (E.INVALID_REQUEST, message)


def test_v0_join_with_an_empty_member_id_gets_one_from_the_server(env: Env) -> None:
    """Only v0 lets the server pick the member id (KIP-1082 made v1 clients generate it)."""
    group = unique("bad848-v0")
    response = heartbeat(
        env.kcoord.bootstrap, 0, **join_request(group, "", subscribed_topic_names=[env.other_topic])
    )
    assert response.error_code == 0 and response.member_id, response
    assert uuid.UUID(response.member_id)
    assert assigned(response) == {env.other_topic_id: {0, 1}}


@pytest.mark.parametrize("timeout", [0, -5, -(2**31), 2**31 - 1])
def test_a_rebalance_timeout_other_than_minus_one_is_taken_as_it_is(env: Env, timeout: int) -> None:
    """Kafka checks only that a join carries one (-1 = not given); any other value is stored."""
    group = unique("bad848-rto")
    response = heartbeat(env.kcoord.bootstrap, **join_request(group, str(uuid.uuid4()), rebalance_timeout_ms=timeout,
                                                              subscribed_topic_names=[env.other_topic]))  # fmt: skip
    assert response.error_code == 0, response
    assert assigned(response) == {env.other_topic_id: {0, 1}}


def test_an_unknown_server_assignor(env: Env) -> None:
    same = env.members["same"]
    for who, member_id, epoch in [("joining", str(uuid.uuid4()), 0), ("member", same.member_id, same.epoch)]:
        fields = join_request(same.group, member_id, member_epoch=epoch, server_assignor="sticky")
        response = heartbeat(env.kcoord.bootstrap, **fields)
        assert (response.error_code, response.error_message) == (
            E.UNSUPPORTED_ASSIGNOR, "ServerAssignor sticky is not supported. Supported assignors: uniform, range."
        ), who  # fmt: skip


# -- regular expressions ----------------------------------------------------------------------------------------
# Refused by RE2 (google-re2, kcoord) and RE2/J (Kafka) alike; "(?=x)" and "(a)\1" compile in java.util.regex.
BAD_REGEXES = ["[a-", "(", "a{2,1}", "(?=bad848)", r"(a)\1", "*", r"\8"]


@pytest.mark.parametrize("regex", BAD_REGEXES)
def test_a_regex_that_does_not_compile_under_re2(env: Env, regex: str) -> None:
    same = env.members["same"]
    joining = heartbeat(env.kcoord.bootstrap, **join_request(same.group, str(uuid.uuid4()),
                        subscribed_topic_names=None, subscribed_topic_regex=regex))  # fmt: skip
    assert joining.error_code == E.INVALID_REGULAR_EXPRESSION, joining
    assert (joining.error_message or "").startswith(
        f"SubscribedTopicRegex `{regex}` is not a valid regular expression"
    )
    # the healthy member itself switching to it: refused, it keeps its subscription
    switching = heartbeat(env.kcoord.bootstrap, group_id=same.group, member_id=same.member_id, member_epoch=same.epoch,
                          subscribed_topic_regex=regex)  # fmt: skip
    assert switching.error_code == E.INVALID_REGULAR_EXPRESSION, switching


def test_names_and_a_regex_together_subscribe_to_both(env: Env) -> None:
    """Kafka resolves a new regex asynchronously (its topics may come a heartbeat later); kcoord
    at once. Either way the member ends up with the topics of both."""
    group, member_id = unique("bad848-both"), str(uuid.uuid4())
    response = heartbeat(env.kcoord.bootstrap, **join_request(group, member_id,
                         subscribed_topic_names=[env.other_topic], subscribed_topic_regex=f"{env.topic}|no-such-.*"))  # fmt: skip
    assert response.error_code == 0, response
    both = {env.other_topic_id: {0, 1}, env.topic_id: set(range(PARTITIONS))}
    owned = assigned(response)
    for _ in range(10):
        if owned == both:
            break
        response = heartbeat(env.kcoord.bootstrap, group_id=group, member_id=member_id,
                             member_epoch=response.member_epoch, topic_partitions=owned_field(owned))  # fmt: skip
        assert response.error_code == 0, response
        owned = assigned(response) if response.assignment is not None else owned
        time.sleep(0.2)
    assert owned == both


# -- sizes ------------------------------------------------------------------------------------------------------
def test_a_subscription_to_five_thousand_topic_names(env: Env) -> None:
    """Mostly topics that do not exist: the member gets the partitions of the ones that do."""
    names = [f"bad848-missing-{i:05d}-{uuid.uuid4().hex}" for i in range(4_999)] + [env.other_topic]
    group, member_id = unique("bad848-5k"), str(uuid.uuid4())
    response = heartbeat(env.kcoord.bootstrap, **join_request(group, member_id, subscribed_topic_names=names))
    assert response.error_code == 0, response
    assert assigned(response) == {env.other_topic_id: {0, 1}}
    again = heartbeat(
        env.kcoord.bootstrap, group_id=group, member_id=member_id, member_epoch=response.member_epoch
    )
    assert again.error_code == 0 and again.member_epoch == response.member_epoch, again
    described = describe(env.kcoord.bootstrap, group)
    assert described.error_code == 0 and len(described.members[0].subscribed_topic_names) == 5_000


def test_the_same_five_thousand_missing_names_in_the_healthy_members_group(env: Env) -> None:
    """A newcomer subscribing only to topics that do not exist gets nothing and takes nothing from
    the healthy member (its join and its leave bump the group epoch, legitimately)."""
    same = env.members["same"]
    env.group_epochs_moved = True
    names = [f"bad848-missing-{i:05d}" for i in range(5_000)]
    member_id = str(uuid.uuid4())
    response = heartbeat(
        env.kcoord.bootstrap, **join_request(same.group, member_id, subscribed_topic_names=names)
    )
    assert response.error_code == 0 and assigned(response) == {}, response
    check = full_heartbeat(env.kcoord.bootstrap, same, env.topic)
    assert check.error_code == 0 and assigned(check) == same.owned, check
    same.epoch = check.member_epoch  # the group epoch moved with the newcomer; the partitions did not
    left = heartbeat(env.kcoord.bootstrap, group_id=same.group, member_id=member_id, member_epoch=-1)
    assert left.error_code == 0, left
    check = full_heartbeat(env.kcoord.bootstrap, same, env.topic)
    assert check.error_code == 0 and assigned(check) == same.owned, check
    same.epoch = check.member_epoch


@pytest.mark.parametrize("length", [37, 1_000, 32_767])
def test_a_long_member_id_is_a_member_id(env: Env, length: int) -> None:
    """Kafka does not limit a member id's length (clients send a UUID; the Java client's is 22
    characters of base64): anything its string reader takes (<= 0x7fff bytes) is accepted."""
    group, member_id = unique("bad848-longmid"), ("m" * length)
    response = heartbeat(
        env.kcoord.bootstrap, **join_request(group, member_id, subscribed_topic_names=[env.other_topic])
    )
    assert response.error_code == 0 and response.member_id == member_id, response
    again = heartbeat(
        env.kcoord.bootstrap, group_id=group, member_id=member_id, member_epoch=response.member_epoch
    )
    assert again.error_code == 0, again
    left = heartbeat(env.kcoord.bootstrap, group_id=group, member_id=member_id, member_epoch=-1)
    assert left.error_code == 0, left


def test_a_long_group_id_is_a_group_id(env: Env) -> None:
    group = unique("bad848-longgroup").ljust(32_767, "g")
    member_id = str(uuid.uuid4())
    response = heartbeat(
        env.kcoord.bootstrap, **join_request(group, member_id, subscribed_topic_names=[env.other_topic])
    )
    assert response.error_code == 0, response
    assert assigned(response) == {env.other_topic_id: {0, 1}}
    described = describe(env.kcoord.bootstrap, group)
    assert described.error_code == 0 and described.group_id == group


@pytest.mark.parametrize("where", ["group_id", "member_id"])
def test_a_string_longer_than_kafka_reads_closes_the_connection(env: Env, where: str) -> None:
    fields = join_request(
        unique("bad848-toolong"), str(uuid.uuid4()), subscribed_topic_names=[env.other_topic]
    )
    fields[where] = fields[where].ljust(32_768, "x")
    with WireClient(env.kcoord.bootstrap) as client:
        client.send(CGH, 1, REQ(**fields))
        assert client.is_closed_by_server()


# -- offsets and describe ---------------------------------------------------------------------------------------
def test_offset_commit_and_fetch_v10_with_topic_ids_that_do_not_exist(env: Env) -> None:
    same, missing = env.members["same"], uuid.uuid4()
    C = m.OffsetCommitRequest
    commit = C(
        group_id=same.group, generation_id_or_member_epoch=same.epoch, member_id=same.member_id,
        topics=[C.OffsetCommitRequestTopic(topic_id=t, partitions=[C.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=7)]) for t in (env.topic_id, missing)],
    )  # fmt: skip
    with WireClient(env.kcoord.bootstrap) as client:
        committed = client.request(OFFSET_COMMIT, 10, commit)
    # By id, not in order: Kafka answers the topics that failed its checks first (KafkaApisTest
    # testHandleOffsetCommitRequestTopicsAndPartitionsValidation), kcoord in request order.
    assert {t.topic_id: [p.error_code for p in t.partitions] for t in committed.topics} == {
        env.topic_id: [E.NONE], missing: [E.UNKNOWN_TOPIC_ID]
    }  # fmt: skip
    F = m.OffsetFetchRequest
    fetch = F(groups=[F.OffsetFetchRequestGroup(group_id=same.group, member_id=same.member_id, member_epoch=same.epoch,
                                                 topics=[F.OffsetFetchRequestTopics(topic_id=t, partition_indexes=[0])
                                                         for t in (env.topic_id, missing)])])  # fmt: skip
    with WireClient(env.kcoord.bootstrap) as client:
        fetched = client.request(OFFSET_FETCH, 10, fetch).groups[0]
    assert fetched.error_code == 0, fetched
    assert {t.topic_id: [(p.committed_offset, p.error_code) for p in t.partitions] for t in fetched.topics} == {
        env.topic_id: [(7, E.NONE)], missing: [(-1, E.UNKNOWN_TOPIC_ID)]
    }  # fmt: skip


def test_describe_of_groups_that_do_not_exist(env: Env) -> None:
    missing = unique("bad848-nogroup")
    with WireClient(env.kcoord.bootstrap) as client:
        groups = client.request(CGD, 1, m.ConsumerGroupDescribeRequest(
            group_ids=[missing, env.members["same"].group, missing.ljust(20_000, "z")])).groups  # fmt: skip
    assert [(g.error_code, g.error_message) for g in groups] == [
        (E.GROUP_ID_NOT_FOUND, f"Group {missing} not found."),
        (E.NONE, None),
        (E.GROUP_ID_NOT_FOUND, f"Group {missing.ljust(20_000, 'z')} not found."),
    ]
