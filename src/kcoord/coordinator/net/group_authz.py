"""Kafka's authorization checks on the group APIs kcoord serves itself, as KafkaApis makes them.

Relayed requests run as the client's principal on its own upstream connection, so Kafka checks
those; the group APIs kcoord answers are checked here against the upstream's ACLs (acls.py,
acl_source.py). Per API, the operation, the resource and the error are Kafka 4.0's:

- JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ConsumerGroupHeartbeat, OffsetCommit,
  TxnOffsetCommit, AddOffsetsToTxn: READ on the group, else the whole answer
  GROUP_AUTHORIZATION_FAILED; TxnOffsetCommit and AddOffsetsToTxn first WRITE on the
  transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
- OffsetCommit and TxnOffsetCommit: READ on each topic, else its partitions
  TOPIC_AUTHORIZATION_FAILED (checked before the topic's existence, as Kafka does); nothing left
  to commit: the coordinator is not asked;
- OffsetDelete: DELETE on the group (the whole answer), READ on each topic (per partition);
- ConsumerGroupHeartbeat naming its topics: DESCRIBE on each, else the whole answer
  TOPIC_AUTHORIZATION_FAILED;
- OffsetFetch: DESCRIBE on the group (per group from v8); topics named and not DESCRIBE-able:
  their partitions TOPIC_AUTHORIZATION_FAILED; all topics asked for (null): those left out;
- DescribeGroups, ConsumerGroupDescribe, FindCoordinator (group keys): DESCRIBE on each group,
  per entry where the API names several; DeleteGroups: DELETE on each group; ConsumerGroupDescribe
  also answers a group TOPIC_AUTHORIZATION_FAILED when its assignments name a topic the principal
  may not DESCRIBE;
- ListGroups: every group with DESCRIBE on the CLUSTER, else only those the principal may DESCRIBE;
- DescribeGroups and ConsumerGroupDescribe with ``include_authorized_operations``: each described
  group's READ, DESCRIBE, DELETE, DESCRIBE_CONFIGS and ALTER_CONFIGS the principal may perform, as
  Kafka's bit field.

:func:`check` is pure, like group_guard.py: a decoded request and a decision function in, a
:class:`Denial` (how to answer: the request left to serve and how its answer is completed) or
None (serve it as it is) out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kcoord.coordinator.core.responses import error_response
from kcoord.protocol import messages as m
from kcoord.protocol.codec import Message
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey

from .acls import CLUSTER_NAME, AclOperation, ResourceType
from .group_guard import (
    API_NAMES,
    FIND_COORDINATOR_BATCHED_SINCE,
    GROUP_KEY,
    OFFSET_FETCH_GROUPS_SINCE,
    refuse_entries,
)

# May the connection's principal, from its host, perform (operation, resource type, name)?
Allowed = Callable[[int, int, str], bool]
# A topic entry's name (None: an id no name is known for; left to the topic-id lookup).
TopicName = Callable[[Any], str | None]

READ, WRITE, DELETE, DESCRIBE = (
    AclOperation.READ,
    AclOperation.WRITE,
    AclOperation.DELETE,
    AclOperation.DESCRIBE,
)
GROUP, TOPIC, CLUSTER, TRANSACTIONAL_ID = (
    ResourceType.GROUP,
    ResourceType.TOPIC,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
)

# The operation on the group each single-group API needs.
SINGLE_GROUP_OPERATION: dict[int, int] = {
    ApiKey.JOIN_GROUP: READ,
    ApiKey.SYNC_GROUP: READ,
    ApiKey.HEARTBEAT: READ,
    ApiKey.LEAVE_GROUP: READ,
    ApiKey.OFFSET_COMMIT: READ,
    ApiKey.TXN_OFFSET_COMMIT: READ,
    ApiKey.ADD_OFFSETS_TO_TXN: READ,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: READ,
    ApiKey.OFFSET_DELETE: DELETE,
}
MULTI_GROUP_OPERATION: dict[int, int] = {
    ApiKey.DESCRIBE_GROUPS: DESCRIBE,
    ApiKey.CONSUMER_GROUP_DESCRIBE: DESCRIBE,
    ApiKey.DELETE_GROUPS: DELETE,
    ApiKey.OFFSET_FETCH: DESCRIBE,
    ApiKey.FIND_COORDINATOR: DESCRIBE,
}
TRANSACTIONAL_APIS = frozenset({ApiKey.TXN_OFFSET_COMMIT, ApiKey.ADD_OFFSETS_TO_TXN})
# Plain ints for the comparisons on every group request (an enum member's lookup costs more).
_OFFSET_FETCH, _CONSUMER_GROUP_HEARTBEAT = int(ApiKey.OFFSET_FETCH), int(ApiKey.CONSUMER_GROUP_HEARTBEAT)
_LIST_GROUPS, _FIND_COORDINATOR = int(ApiKey.LIST_GROUPS), int(ApiKey.FIND_COORDINATOR)
TOPIC_AUTHORIZATION_FAILED_MESSAGE = "Topic authorization failed."  # Kafka's, for the error code
COMMIT_TOPIC_APIS = frozenset({ApiKey.OFFSET_COMMIT, ApiKey.TXN_OFFSET_COMMIT, ApiKey.OFFSET_DELETE})


@dataclass(frozen=True)
class Denial:
    """How to answer a request some of which the principal may not do. ``rest``: the request to
    serve as usual (None: nothing); ``answer(served)``: the client's answer from the answer to
    ``rest`` (None if nothing was served); ``denied``: the resources refused, as "type:name"
    (empty when the answer is only filtered, as ListGroups' and OffsetFetch's for all topics are)."""

    api_key: int
    rest: Message | None
    answer: Callable[[Message | None], Message]
    denied: tuple[str, ...] = field(default=())

    @property
    def api_name(self) -> str:
        return API_NAMES.get(self.api_key, "ListGroups")


def by_name(topic: Any) -> str | None:
    return topic.name  # type: ignore[no-any-return]


def check(
    api_key: int,
    version: int,
    request: Any,
    allowed: Allowed,
    topic_name: TopicName = by_name,
    denied_groups: frozenset[str] | None = None,
) -> Denial | None:
    """None to serve ``request`` as it is, or how to answer it as Kafka's authorizer would.

    ``denied_groups``: for a multi-group request, the groups its operation is denied on, decided
    already (decision_warmup.py): its groups are not asked about again."""
    group_operation = SINGLE_GROUP_OPERATION.get(api_key)
    if group_operation is not None or (api_key == _OFFSET_FETCH and version < OFFSET_FETCH_GROUPS_SINCE):
        if api_key in TRANSACTIONAL_APIS and not allowed(WRITE, TRANSACTIONAL_ID, request.transactional_id):
            return _whole(
                api_key, version, request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                f"transactional_id:{request.transactional_id}",
            )  # fmt: skip
        group_id: str = request.group_id
        if not allowed(group_operation or DESCRIBE, GROUP, group_id):
            return _whole(
                api_key, version, request, ErrorCode.GROUP_AUTHORIZATION_FAILED, f"group:{group_id}"
            )
        if api_key in COMMIT_TOPIC_APIS:
            return _commit_topics(api_key, version, request, allowed, topic_name)
        if api_key == _CONSUMER_GROUP_HEARTBEAT:
            return _subscription(api_key, version, request, allowed)
        if api_key == _OFFSET_FETCH:
            return _fetch_topics_v0_7(request, allowed)
        return None
    if api_key == _LIST_GROUPS:
        return _list_groups(request, allowed)
    if api_key == _FIND_COORDINATOR:
        if request.key_type != GROUP_KEY:
            return None
        if version < FIND_COORDINATOR_BATCHED_SINCE:
            if allowed(DESCRIBE, GROUP, request.key):
                return None
            return _whole(
                api_key, version, request, ErrorCode.GROUP_AUTHORIZATION_FAILED, f"group:{request.key}"
            )
    operation = MULTI_GROUP_OPERATION.get(api_key)
    if operation is None:
        return None
    return _multi_group(api_key, version, request, allowed, operation, topic_name, denied_groups)


def _whole(api_key: int, version: int, request: Any, error: int, resource: str) -> Denial:
    refused: Message
    if api_key == ApiKey.OFFSET_FETCH:
        # Kafka's answer to a group it will not describe (below v8): the error, no partitions.
        refused = m.OffsetFetchResponse(topics=[], error_code=error)
    else:
        refused = error_response(api_key, version, request, error)
    return Denial(api_key, None, lambda _served: refused, (resource,))


def _copy(message: Any, **changes: Any) -> Any:
    cls = type(message)
    values = {n: getattr(message, n) for n in cls.FIELDS}
    values.update(changes)
    return cls(**values)


def _split_topics(
    topics: list[Any], operation: int, allowed: Allowed, topic_name: TopicName
) -> tuple[list[Any], list[Any]]:
    """``(kept, refused)``: the topics the principal may perform ``operation`` on, and the others.
    A topic whose name is unknown (an id not yet resolved) is kept, for the id lookup to answer."""
    refused = []
    for topic in topics:
        name = topic.name or topic_name(topic)  # by id (v10) only when it has no name
        if name is not None and not allowed(operation, TOPIC, name):
            refused.append(topic)
    if not refused:
        return topics, refused
    return [t for t in topics if t not in refused], refused


def _commit_topics(
    api_key: int, version: int, request: Any, allowed: Allowed, topic_name: TopicName
) -> Denial | None:
    """OffsetCommit, TxnOffsetCommit, OffsetDelete: READ on each topic, else its partitions
    TOPIC_AUTHORIZATION_FAILED."""
    for topic in request.topics:  # the common case, every topic allowed, without building lists
        name = topic.name or topic_name(topic)
        if name is not None and not allowed(READ, TOPIC, name):
            break
    else:
        return None
    kept, refused = _split_topics(request.topics, READ, allowed, topic_name)
    denied = tuple(f"topic:{topic_name(t)}" for t in refused)
    if api_key == ApiKey.OFFSET_DELETE:
        R = m.OffsetDeleteResponse
        refused_topics = [
            R.OffsetDeleteResponseTopic(name=t.name, partitions=[
                R.OffsetDeleteResponsePartition(partition_index=p.partition_index, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                for p in t.partitions])
            for t in refused
        ]  # fmt: skip
        # Kafka asks the coordinator even when no topic is left (it answers for the group).
        rest: Message | None = _copy(request, topics=kept)
    else:
        refused_part = _copy(request, topics=refused)
        refused_topics = error_response(
            api_key, version, refused_part, ErrorCode.TOPIC_AUTHORIZATION_FAILED
        ).topics  # type: ignore[attr-defined]
        # Nothing left to commit: Kafka answers without asking the coordinator.
        rest = _copy(request, topics=kept) if kept else None

    def answer(served: Message | None) -> Message:
        if served is None:
            served = error_response(api_key, version, _copy(request, topics=[]), ErrorCode.NONE)
        served.topics = [*refused_topics, *(served.topics or ())]  # type: ignore[attr-defined]
        return served

    return Denial(api_key, rest, answer, denied)


def _subscription(api_key: int, version: int, request: Any, allowed: Allowed) -> Denial | None:
    """ConsumerGroupHeartbeat naming topics it may not DESCRIBE: the whole answer
    TOPIC_AUTHORIZATION_FAILED."""
    names = request.subscribed_topic_names
    if not names:
        return None
    refused = [n for n in names if not allowed(DESCRIBE, TOPIC, n)]
    if not refused:
        return None
    answer = error_response(api_key, version, request, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    return Denial(api_key, None, lambda _served: answer, tuple(f"topic:{n}" for n in refused))


def _refused_fetch_partitions(R: Any, partition_indexes: list[int]) -> list[Any]:
    return [
        R(
            partition_index=p,
            committed_offset=-1,
            metadata="",
            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        )
        for p in partition_indexes
    ]


def _fetch_topics_v0_7(request: Any, allowed: Allowed) -> Denial | None:
    """OffsetFetch below v8 (one group): topics it may not DESCRIBE answered per partition, or,
    when all topics are asked for, left out."""
    R = m.OffsetFetchResponse
    if request.topics is None:
        return Denial(ApiKey.OFFSET_FETCH, request, lambda served: _filter_fetch_topics(served, allowed))
    kept, refused = _split_topics(request.topics, DESCRIBE, allowed, by_name)
    if not refused:
        return None
    refused_topics = [
        R.OffsetFetchResponseTopic(name=t.name, partitions=_refused_fetch_partitions(R.OffsetFetchResponsePartition, t.partition_indexes))
        for t in refused
    ]  # fmt: skip
    rest = _copy(request, topics=kept)

    def answer(served: Message | None) -> Message:
        assert isinstance(served, R)
        served.topics = [*(served.topics or ()), *refused_topics]
        return served

    return Denial(ApiKey.OFFSET_FETCH, rest, answer, tuple(f"topic:{t.name}" for t in refused))


def _filter_fetch_topics(served: Message | None, allowed: Allowed) -> Message:
    assert isinstance(served, m.OffsetFetchResponse)
    if served.topics:
        served.topics = [t for t in served.topics if allowed(DESCRIBE, TOPIC, t.name)]
    return served


def _list_groups(request: Any, allowed: Allowed) -> Denial | None:
    if allowed(DESCRIBE, CLUSTER, CLUSTER_NAME):
        return None

    def answer(served: Message | None) -> Message:
        assert isinstance(served, m.ListGroupsResponse)
        served.groups = [g for g in served.groups if allowed(DESCRIBE, GROUP, g.group_id)]
        return served

    return Denial(ApiKey.LIST_GROUPS, request, answer)


def _multi_group(
    api_key: int,
    version: int,
    request: Any,
    allowed: Allowed,
    operation: int,
    topic_name: TopicName,
    known_denied: frozenset[str] | None = None,
) -> Denial | None:
    denied_groups: list[str] = []

    def refused(group_id: str) -> bool:
        if allowed(operation, GROUP, group_id):
            return False
        denied_groups.append(group_id)
        return True

    if known_denied is None:
        refusal = refuse_entries(api_key, version, request, refused)
    elif known_denied:
        refusal = refuse_entries(api_key, version, request, known_denied.__contains__)
        denied_groups.extend(known_denied)
    else:
        refusal = None  # every group allowed: the request goes on whole
    rest: Message | None = request if refusal is None else refusal.rest
    complete = None if refusal is None else refusal.answer
    denied = tuple(dict.fromkeys(f"group:{g}" for g in denied_groups))
    if api_key == ApiKey.CONSUMER_GROUP_DESCRIBE and rest is not None:
        describe_complete = complete

        def complete(served: Message | None) -> Message:
            served = _hide_undescribable_topics(served, allowed)
            return served if describe_complete is None else describe_complete(served)

    if rest is not None and getattr(request, "include_authorized_operations", False):
        operations_complete = complete

        def complete(served: Message | None) -> Message:
            served = _fill_authorized_operations(served, allowed)
            return served if operations_complete is None else operations_complete(served)

    if api_key == ApiKey.OFFSET_FETCH and rest is not None:
        topics = _fetch_topics_v8(rest, allowed, topic_name)
        if topics is not None:
            rest, complete_topics, denied_topics = topics
            denied += denied_topics
            group_complete = complete

            def complete(served: Message | None) -> Message:
                served = complete_topics(served)
                return served if group_complete is None else group_complete(served)

    if complete is None:
        return None
    return Denial(api_key, rest, complete, denied)


def _fetch_topics_v8(
    request: Any, allowed: Allowed, topic_name: TopicName
) -> tuple[Message, Callable[[Message | None], Message], tuple[str, ...]] | None:
    """OffsetFetch v8+: per group, topics named that may not be DESCRIBE-d answered per partition
    TOPIC_AUTHORIZATION_FAILED, and for a group asking for all topics, those left out."""
    R = m.OffsetFetchResponse
    refused_by_group: dict[str, list[Any]] = {}
    filter_groups: set[str] = set()
    groups = []
    for group in request.groups:
        if group.topics is None:
            filter_groups.add(group.group_id)
            groups.append(group)
            continue
        kept, refused = _split_topics(group.topics, DESCRIBE, allowed, topic_name)
        if refused:
            refused_by_group[group.group_id] = refused
            group = _copy(group, topics=kept)
        groups.append(group)
    if not refused_by_group and not filter_groups:
        return None
    denied = tuple(f"topic:{topic_name(t)}" for ts in refused_by_group.values() for t in ts)

    def complete(served: Message | None) -> Message:
        assert isinstance(served, R)
        for group in served.groups:
            if group.group_id in filter_groups and group.topics:
                group.topics = [
                    t for t in group.topics if (n := topic_name(t)) is None or allowed(DESCRIBE, TOPIC, n)
                ]
            refused = refused_by_group.get(group.group_id)
            if refused:
                group.topics = [*(group.topics or ()), *(
                    R.OffsetFetchResponseTopics(name=t.name, topic_id=t.topic_id, partitions=_refused_fetch_partitions(R.OffsetFetchResponsePartitions, t.partition_indexes))
                    for t in refused
                )]  # fmt: skip
        return served

    return _copy(request, groups=groups), complete, denied


def _hide_undescribable_topics(served: Message | None, allowed: Allowed) -> Message:
    """ConsumerGroupDescribe: a group whose members' assignments (current or target) name a topic
    the principal may not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED, as Kafka answers it,
    so the description does not reveal the topic."""
    R = m.ConsumerGroupDescribeResponse
    assert isinstance(served, R)
    for index, group in enumerate(served.groups):
        if group.error_code != ErrorCode.NONE:
            continue
        topics = {
            tp.topic_name
            for member in group.members
            for assignment in (member.assignment, member.target_assignment)
            for tp in assignment.topic_partitions
        }
        if all(allowed(DESCRIBE, TOPIC, t) for t in topics):
            continue
        served.groups[index] = R.DescribedGroup(
            group_id=group.group_id,
            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            error_message=TOPIC_AUTHORIZATION_FAILED_MESSAGE,
        )
    return served


# The operations Kafka 4.0 reports on a group (its supported operations on the GROUP resource,
# the group configs of KIP-848 included).
GROUP_OPERATIONS = (READ, DESCRIBE, DELETE, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS)


def authorized_operations(allowed: Allowed, group_id: str) -> int:
    """Kafka's bit field of the group operations the principal may perform (bit = operation code)."""
    return sum(1 << op for op in GROUP_OPERATIONS if allowed(op, GROUP, group_id))


def _fill_authorized_operations(served: Message | None, allowed: Allowed) -> Message:
    """DescribeGroups and ConsumerGroupDescribe asked for ``include_authorized_operations``: each
    group described gets the operations the principal may perform on it, as Kafka fills them."""
    assert served is not None
    for group in served.groups:  # type: ignore[attr-defined]
        if group.error_code == ErrorCode.NONE:
            group.authorized_operations = authorized_operations(allowed, group.group_id)
    return served
