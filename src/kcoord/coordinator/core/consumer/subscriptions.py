"""What a member subscribes to, as topic ids of the cluster's topics (Kafka's ``TopicIds`` over a
member's ``subscribedTopicNames`` and the topics its regular expression resolved to).

Both engines of a heartbeat read it: the target assignment (which topics the assignor may give the
member) and the reconciliation (which topics the member must give up). A subscribed name that is
not a topic of the cluster has no id and is left out; a regular expression the coordinator has not
resolved yet matches no topics, to be conservative (as in Kafka).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from .group import ResolvedRegularExpression
from .member import ConsumerGroupMember


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """One topic of the cluster, as the coordinator's metadata image knows it."""

    name: str
    partition_count: int


# topic id -> its name and partition count: the cluster's topics the coordinator knows of. An image
# is never changed in place: a change of the cluster's topics is a new image, so what is derived
# from one may be kept while the coordinator is handed the same image (an identity check).
TopicImage = Mapping[uuid.UUID, TopicMetadata]


def no_topics() -> TopicImage:
    """A topic image that knows no topic (the shard's default)."""
    return {}


def topic_ids_by_name(topics: TopicImage) -> dict[str, uuid.UUID]:
    return {metadata.name: topic_id for topic_id, metadata in topics.items()}


def subscribed_topic_names(
    member: ConsumerGroupMember, resolved_regular_expressions: Mapping[str, ResolvedRegularExpression]
) -> frozenset[str]:
    """The member's topics by name, and those its regular expression resolved to (the protocol
    allows both at once; the Java consumer uses one or the other)."""
    regex = member.subscribed_regex
    resolved = resolved_regular_expressions.get(regex) if regex is not None else None
    if resolved is None:
        return member.subscribed_topic_names
    return member.subscribed_topic_names | resolved.topics


def subscribed_topic_ids(
    member: ConsumerGroupMember,
    resolved_regular_expressions: Mapping[str, ResolvedRegularExpression],
    ids_by_name: Mapping[str, uuid.UUID],
) -> frozenset[uuid.UUID]:
    """The ids of the member's subscribed topics that exist (``ids_by_name``: :func:`topic_ids_by_name`)."""
    names = subscribed_topic_names(member, resolved_regular_expressions)
    return frozenset(ids_by_name[name] for name in names if name in ids_by_name)


def assignment_is_subscription_consistent(
    member: ConsumerGroupMember, subscribed_ids: Collection[uuid.UUID]
) -> bool:
    """Whether every topic the member is assigned is still one it subscribes to (Kafka's
    ``assignmentIsSubscriptionConsistent``). A fact of the member's durable state, so a handler may
    ask it at any time, after a reload too; a deleted topic has no id and is never consistent.
    When it is false, the reconciliation strips those topics (``enforce_subscription_consistency``)."""
    return all(topic_id in subscribed_ids for topic_id in member.assigned_partitions)


def assigned_topics_are_subscribed(
    member: ConsumerGroupMember,
    subscribed_names: Collection[str],
    topics: TopicImage,
    ids_by_name: Mapping[str, uuid.UUID],
) -> bool:
    """:func:`assignment_is_subscription_consistent` read the other way round, for the heartbeat's
    path: from the topics the member is assigned (a few) rather than the ones it subscribes to (maybe
    thousands). The same answer: an assigned topic id counts as subscribed when the image names it,
    by a subscribed name that the image maps back to that id."""
    for topic_id in member.assigned_partitions:
        metadata = topics.get(topic_id)
        if metadata is None or metadata.name not in subscribed_names:
            return False
        # The image's own id object, as a rule: identity first (a UUID's == is a Python-level call).
        named = ids_by_name.get(metadata.name)
        if named is not topic_id and named != topic_id:
            return False
    return True
