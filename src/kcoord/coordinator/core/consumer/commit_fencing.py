"""Which offset commits a consumer group accepts from a member: the zombie-commit fence.

A commit carries the member epoch the client last heard. Kafka's first rule (KIP-848) accepted
only the member's current epoch, which also refuses honest commits sent just before the client
learnt of an epoch bump that did not take its partitions away. ``group.consumer.offset.commit.fencing``
picks one of three rules for a commit at an *older* epoch than the member's:

- ``strict``: refused (Kafka up to 4.2).
- ``revocation-epoch``: accepted iff the member lost no partitions after that epoch, i.e.
  ``revocation_epoch < client epoch``; a member replayed from a record without kcoord's revocation
  epoch is strict until it next loses partitions. KAFKA-19779's first design, which Kafka replaced
  with assignment epochs before shipping it; coarser than them (one epoch per member: after any
  revocation every older commit is refused, even for partitions the member kept).
- ``assignment-epoch`` (the default; KIP-1251, Kafka 4.3+): per partition, accepted iff the member
  owns it or must still revoke it, and got it at or before that epoch:
  ``assignment epoch(partition) <= client epoch``.

Every rule refuses a newer epoch than the member's. ``strict`` and ``revocation-epoch`` accept the
member's current epoch for any partition, as Kafka does. ``assignment-epoch`` holds the current
epoch to ownership too (kcoord's rule: "a partition not owned by the member is rejected"):
Kafka 4.3 accepts a commit at the current epoch without looking at the partitions. No honest client
is refused by it: a client commits only what it owns, and a partition it is revoking is still its
own until it acknowledges the revocation; what it refuses is a commit racing the revocation's
acknowledgement, the zombie commit this setting is for.

What the three share is Kafka 4.3's ``ConsumerGroup.validateOffsetCommit``, in this order:

1. A negative epoch commits to a group without members: the admin client, or a consumer that does
   not use group management ("simple" commits).
2. A TxnOffsetCommit with no member id, no instance id and generation -1 commits (a producer that
   sent no group metadata).
3. The member id must be a member: UNKNOWN_MEMBER_ID. The instance id is not checked.
4. A member of the consumer protocol must use OffsetCommit v9+: UNSUPPORTED_VERSION.
5. A member that joined with the classic protocol (JoinGroup into a consumer group) is always held
   to its current epoch, its generation: ILLEGAL_GENERATION otherwise.
6. For the others, a refused epoch is STALE_MEMBER_EPOCH, or ILLEGAL_GENERATION for
   TxnOffsetCommit (which has no STALE_MEMBER_EPOCH; Kafka converts it).

The reverse case, a consumer-protocol member committing to a classic group, cannot reach this
module: its member id is unknown to the classic group (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION for a
generation mismatch; :meth:`ClassicGroup.validate_offset_commit`).

Kafka 4.3 fails a whole commit at the first partition its validator refuses; the codes here are
per partition, and :func:`request_error` gives that whole-request answer.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from enum import Enum
from typing import TYPE_CHECKING

from kcoord.protocol.errors import ErrorCode

from .member import UNKNOWN_REVOCATION_EPOCH

if TYPE_CHECKING:
    from .group import ConsumerGroup

# A committed partition: (topic id, partition index).
TopicIdPartition = tuple[uuid.UUID, int]
# Kafka's Uuid.ZERO_UUID, "no topic id": a commit by a topic name the coordinator cannot map to an
# id. No member holds a partition of it, so no older epoch is accepted for it; at the member's
# current epoch ownership cannot be judged and the commit is accepted, as Kafka does.
UNKNOWN_TOPIC_ID = uuid.UUID(int=0)

# OffsetCommit v9 is the first with a member epoch (KIP-848): the least a consumer-protocol member uses.
OFFSET_COMMIT_CONSUMER_PROTOCOL_VERSION = 9
UNKNOWN_GENERATION_ID = -1


class OffsetCommitFencing(Enum):
    """The values of ``group.consumer.offset.commit.fencing``."""

    STRICT = "strict"
    REVOCATION_EPOCH = "revocation-epoch"
    ASSIGNMENT_EPOCH = "assignment-epoch"


def validate_offset_commit(
    group: ConsumerGroup,
    member_id: str,
    instance_id: str | None,
    client_epoch: int,
    partitions: Iterable[TopicIdPartition],
    is_transactional: bool,
    *,
    fencing: OffsetCommitFencing = OffsetCommitFencing.ASSIGNMENT_EPOCH,
    api_version: int = OFFSET_COMMIT_CONSUMER_PROTOCOL_VERSION,
) -> dict[TopicIdPartition, ErrorCode]:
    """The error code of each committed partition (NONE: accepted), in the order given."""
    committed = list(partitions)

    def every(code: ErrorCode) -> dict[TopicIdPartition, ErrorCode]:
        return dict.fromkeys(committed, code)

    if client_epoch < 0 and not group.members:
        return every(ErrorCode.NONE)
    if is_transactional and client_epoch == UNKNOWN_GENERATION_ID and not member_id and instance_id is None:
        return every(ErrorCode.NONE)
    member = group.members.get(member_id)
    if member is None:
        return every(ErrorCode.UNKNOWN_MEMBER_ID)
    if member.uses_classic_protocol:
        return every(ErrorCode.NONE if client_epoch == member.member_epoch else ErrorCode.ILLEGAL_GENERATION)
    if not is_transactional and api_version < OFFSET_COMMIT_CONSUMER_PROTOCOL_VERSION:
        return every(ErrorCode.UNSUPPORTED_VERSION)
    stale = ErrorCode.ILLEGAL_GENERATION if is_transactional else ErrorCode.STALE_MEMBER_EPOCH
    if client_epoch > member.member_epoch:
        return every(stale)
    if client_epoch == member.member_epoch and fencing is not OffsetCommitFencing.ASSIGNMENT_EPOCH:
        return every(ErrorCode.NONE)
    if fencing is OffsetCommitFencing.STRICT:
        return every(stale)
    if fencing is OffsetCommitFencing.REVOCATION_EPOCH:
        revoked_since = (
            member.revocation_epoch == UNKNOWN_REVOCATION_EPOCH or client_epoch <= member.revocation_epoch
        )
        return every(stale if revoked_since else ErrorCode.NONE)
    current = client_epoch == member.member_epoch
    codes: dict[TopicIdPartition, ErrorCode] = {}
    for topic_id, partition in committed:
        assigned_at = member.assignment_epoch(topic_id, partition)
        accepted = (assigned_at is not None and assigned_at <= client_epoch) or (
            current and topic_id == UNKNOWN_TOPIC_ID
        )
        codes[(topic_id, partition)] = ErrorCode.NONE if accepted else stale
    return codes


def request_error(codes: Mapping[TopicIdPartition, ErrorCode]) -> ErrorCode:
    """The answer Kafka 4.3 gives every partition of the commit: the first refusal, else NONE."""
    return next((code for code in codes.values() if code != ErrorCode.NONE), ErrorCode.NONE)
