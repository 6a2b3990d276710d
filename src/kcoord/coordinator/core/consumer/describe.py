"""ConsumerGroupDescribe v0-1 (KIP-848): a shard's consumer groups as Kafka 4.x describes them.

Read-only: no record, no timer. Kafka's answer, from ``GroupCoordinatorService.consumerGroupDescribe``
(group ids), ``GroupMetadataManager.consumerGroupDescribe`` (one group), ``ConsumerGroup.asDescribedGroup``
and ``ConsumerGroupMember.asConsumerGroupDescribeMember``:

- A null or empty group id: INVALID_GROUP_ID, with group id "" (the service's check, before any shard).
- An id that names no group: GROUP_ID_NOT_FOUND, "Group <id> not found."; one that names a classic
  group (a simple one included): GROUP_ID_NOT_FOUND, "Group <id> is not a consumer group."
  (``GroupMetadataManager.consumerGroup``'s GroupIdNotFoundException, whose message Kafka answers).
- A consumer group: its state (Empty, Assigning, Reconciling, Stable), group epoch, target assignment
  epoch, and assignor: the server assignor most members name, else the default
  (:func:`.target_assignment.preferred_server_assignor`). Then each member: ids, epoch, client,
  subscribed topic names and regex (as stored), its current assignment (the partitions it owns; not
  those pending revocation) and its target assignment (none if it has no target yet).
- MemberType (v1): 0 for a member that joined with the classic protocol (JoinGroup), 1 for a
  consumer-protocol member; v0 has no such field.
- Assignments name topics by id *and* name. Names come from the injected read-only topic id -> name
  resolver; a topic it does not know is left out of the assignment, as Kafka's
  ``topicPartitionsFromMap`` leaves out a topic missing from its metadata image (a deleted topic).
- AuthorizedOperations: left at the schema default, Integer.MIN_VALUE, whatever
  IncludeAuthorizedOperations says. That is Kafka's answer when the client does not ask; when it
  asks, Kafka's KafkaApis fills in the bitfield its authorizer grants, which kcoord cannot know
  (it does no authorization; kcoord's DescribeGroups does the same).

Order: groups in request order (the router merges shards' answers that way), members in the order
the group holds them, topics as each assignment holds them, partitions and subscribed topic names
sorted (Kafka's come from hash sets: no order is promised).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Container, Iterable, Mapping
from typing import Any

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

from ..result import RequestContext, Result
from .group import ConsumerGroup
from .member import ConsumerGroupMember
from .store import ConsumerGroups
from .target_assignment import preferred_server_assignor

# topic id -> topic name, read-only; None for a topic it does not know
TopicNameResolver = Callable[[uuid.UUID], "str | None"]

# ConsumerGroupDescribeResponse's MemberType (v1+): the byte Kafka writes.
MEMBER_TYPE_UNKNOWN = -1  # the schema default, never written by Kafka's coordinator
MEMBER_TYPE_CLASSIC = 0
MEMBER_TYPE_CONSUMER = 1

_R = m.ConsumerGroupDescribeResponse


def no_topic_names(topic_id: uuid.UUID) -> str | None:
    """The default :data:`TopicNameResolver`: knows no topic, so every assignment is described as
    empty (Kafka leaves out the topics its metadata does not know)."""
    return None


class ConsumerGroupDescriber:
    def __init__(
        self,
        consumer: ConsumerGroups,
        classic_groups: Container[str],
        resolve_topic_name: TopicNameResolver = no_topic_names,
    ) -> None:
        """``classic_groups``: the ids of the shard's classic groups (simple ones included)."""
        self.consumer = consumer
        self.classic_groups = classic_groups
        self.resolve_topic_name = resolve_topic_name

    def handle(self, ctx: RequestContext, req: m.ConsumerGroupDescribeRequest, out: Result) -> None:
        out.reply(ctx, _R(groups=[self.describe(group_id) for group_id in req.group_ids]))

    def describe(self, group_id: str | None) -> Any:
        if not group_id:
            return _R.DescribedGroup(group_id="", error_code=int(ErrorCode.INVALID_GROUP_ID))
        group = self.consumer.get(group_id)
        if group is not None:
            return describe_group(group, self.resolve_topic_name)
        if group_id in self.classic_groups:
            return _not_found(group_id, f"Group {group_id} is not a consumer group.")
        return _not_found(group_id, f"Group {group_id} not found.")


def describe_group(group: ConsumerGroup, resolve_topic_name: TopicNameResolver) -> Any:
    """Kafka's ``ConsumerGroup.asDescribedGroup``."""
    return _R.DescribedGroup(
        group_id=group.group_id,
        group_state=group.state_name,
        group_epoch=group.group_epoch,
        assignment_epoch=group.target_assignment_epoch,
        assignor_name=preferred_server_assignor(group.members.values()),
        members=[
            describe_member(member, group.target_assignment_of(member.member_id), resolve_topic_name)
            for member in group.members.values()
        ],
    )


def describe_member(
    member: ConsumerGroupMember,
    target: Mapping[uuid.UUID, Iterable[int]],
    resolve_topic_name: TopicNameResolver,
) -> Any:
    """Kafka's ``ConsumerGroupMember.asConsumerGroupDescribeMember``."""
    return _R.Member(
        member_id=member.member_id,
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        member_epoch=member.member_epoch,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=sorted(member.subscribed_topic_names),
        subscribed_topic_regex=member.subscribed_topic_regex,
        assignment=_assignment(member.assigned_partitions, resolve_topic_name),
        target_assignment=_assignment(target, resolve_topic_name),
        member_type=MEMBER_TYPE_CLASSIC if member.uses_classic_protocol else MEMBER_TYPE_CONSUMER,
    )


def _assignment(partitions: Mapping[uuid.UUID, Iterable[int]], resolve_topic_name: TopicNameResolver) -> Any:
    """Kafka's ``topicPartitionsFromMap``: a topic without a name is left out."""
    topics = []
    for topic_id, by_partition in partitions.items():
        name = resolve_topic_name(topic_id)
        if name is not None:
            topics.append(
                _R.TopicPartitions(topic_id=topic_id, topic_name=name, partitions=sorted(by_partition))
            )
    return _R.Assignment(topic_partitions=topics)


def _not_found(group_id: str, message: str) -> Any:
    return _R.DescribedGroup(
        group_id=group_id, error_code=int(ErrorCode.GROUP_ID_NOT_FOUND), error_message=message
    )
