"""Kafka's range assignor (org.apache.kafka.clients.consumer.RangeAssignor), eager flavour.

Why real assignments: a coordinator stores and forwards the leader's assignment bytes, and a
rolling-bounce measurement needs to know which partitions each member owns. The assignment must
be the one a Java leader would compute, so members are sorted the way Kafka sorts them: static
members by group.instance.id first, then dynamic members by member id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kcoord.protocol import messages as m


@dataclass(frozen=True, slots=True)
class MemberSubscription:
    member_id: str
    group_instance_id: str | None
    topics: tuple[str, ...]


def _sort_key(member: MemberSubscription) -> tuple[int, str, str]:
    # Kafka: members with an instance id sort before those without, each group by its own id.
    if member.group_instance_id is not None:
        return (0, member.group_instance_id, member.member_id)
    return (1, member.member_id, "")


def range_assign(
    members: Sequence[MemberSubscription], partitions_per_topic: Mapping[str, int]
) -> dict[str, dict[str, list[int]]]:
    """member_id -> {topic: [partitions]}; every member appears, possibly with nothing."""
    result: dict[str, dict[str, list[int]]] = {mem.member_id: {} for mem in members}
    topics = sorted({t for mem in members for t in mem.topics})
    for topic in topics:
        count = partitions_per_topic.get(topic, 0)
        consumers = sorted((mem for mem in members if topic in mem.topics), key=_sort_key)
        if not consumers or count <= 0:
            continue
        per, extra = divmod(count, len(consumers))
        start = 0
        for i, mem in enumerate(consumers):
            n = per + (1 if i < extra else 0)
            if n:
                result[mem.member_id][topic] = list(range(start, start + n))
            start += n
    return result


def encode_subscription(topics: Sequence[str], version: int = 1) -> bytes:
    """ConsumerProtocolSubscription with its int16 version prefix, as a Java consumer sends it (v1)."""
    body = m.ConsumerProtocolSubscription(topics=list(topics)).encode(version)
    return version.to_bytes(2, "big") + body


def decode_subscription(metadata: bytes) -> tuple[str, ...]:
    """Topics of a ConsumerProtocolSubscription (its int16 version prefix says how to read it)."""
    version = _embedded_version(metadata)
    sub = m.ConsumerProtocolSubscription.decode_from(metadata, 2, version)[0]
    return tuple(sub.topics)


def encode_assignment(assignment: Mapping[str, Sequence[int]], version: int = 1) -> bytes:
    """ConsumerProtocolAssignment with its int16 version prefix."""
    tp = m.ConsumerProtocolAssignment.TopicPartition
    parts = [tp(topic=t, partitions=list(p)) for t, p in sorted(assignment.items())]
    body = m.ConsumerProtocolAssignment(assigned_partitions=parts).encode(version)
    return version.to_bytes(2, "big") + body


def decode_assignment(data: bytes) -> dict[str, list[int]]:
    """{topic: partitions}; an empty byte string (no assignment) is an empty dict."""
    if not data:
        return {}
    version = _embedded_version(data)
    assignment = m.ConsumerProtocolAssignment.decode_from(data, 2, version)[0]
    return {tp.topic: list(tp.partitions) for tp in assignment.assigned_partitions}


def _embedded_version(data: bytes) -> int:
    """Versions newer than we know are read as our newest: the embedded protocol only appends fields."""
    version = int.from_bytes(data[:2], "big", signed=True)
    return max(0, min(version, 3))
