"""The consumer group manager (KIP-848): ConsumerGroupHeartbeat's join, heartbeat and leave, and the
session and rebalance timeouts of a consumer group's members (Kafka's
``GroupMetadataManager.consumerGroupHeartbeat`` and the methods around it). The groups themselves and
the replay of their records are :mod:`.store`'s.

A handler reads the group and returns records; the group changes only when the runtime replays them
(:mod:`.group`). So within one heartbeat the group is read as it was before it, and what the
heartbeat changes is carried along explicitly: the member as it will be, the regular expressions as
they will resolve, the replaced static member left out.

One heartbeat, in Kafka's order:

1. Validate the request (Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``), then find the
   group (created by a join) and the member: new, existing (epoch checked), or a static member
   rejoining under a new member id, which takes the place of the one that left (epoch -2): the old
   member's tombstones, then the new member with its subscription, target and assignment.
2. Update the member from the request (every field is "null: unchanged"); write its subscription
   record if it changed. Bump the group epoch when the group is new, the member's topic names
   changed, a regular expression's resolution changed, or the metadata of the subscribed topics
   changed (the *metadata hash*, see :func:`metadata_hash`).
3. When the group epoch is ahead of the target assignment epoch, compute a new target assignment
   (:func:`.target_assignment.update_target_assignment`) in this heartbeat, as Kafka 4.0 does, so
   a joining member gets its partitions in its first answer. A group of at least
   ``group.consumer.assignment.batch.min.members`` members computes at most once per
   ``group.consumer.assignment.interval.ms`` (KIP-1263): members that join together share one
   assignor run; until it runs they reconcile to the last target, and their answers' heartbeat
   interval is the time left until it can run, so none waits a whole heartbeat interval for it.
4. Reconcile the member towards its target (:func:`.reconciliation.reconcile`) and write its
   current assignment when it changed; arm its rebalance timeout while it must revoke partitions.
5. Push back its session timeout and answer with its id, epoch, the heartbeat interval and, for a
   full request or a changed assignment, the partitions it owns.

Leaving (epoch -1) removes the member (its three tombstones, in replay order) and bumps the group
epoch; the new target is computed by the next heartbeat of another member, as in Kafka. A static
member leaving with epoch -2 stays, at epoch -2, so its instance id can rejoin and take its
partitions back; its session timeout still runs and removes it if it does not. A session timeout,
or a rebalance timeout (a member still revoking at the epoch the timer was armed for), fences the
member the way a leave removes it.

Regular expressions are RE2 (Kafka uses RE2/J) and are resolved here, synchronously, against the
topic image; a resolution is remembered per image, so they are matched again only when the
cluster's topics change. A change writes a ConsumerGroupRegularExpression record and bumps the group
epoch. Kafka resolves them asynchronously, at most every 10 s.

The cost of a heartbeat does not grow with the group: what the group subscribes to comes from
subscriber counts the group keeps by replay (:meth:`.group.ConsumerGroup.subscribed_names_after`),
and the metadata hash of an unchanged subscription is remembered per topic image. Only computing a
target assignment walks the members.

The metadata hash is kcoord's: a 64-bit BLAKE2b of the subscribed topics' names, ids and partition
counts, stored in the ConsumerGroupMetadata record's ``MetadataHash`` like Kafka's (KIP-1101), but
not the same number as Kafka's, so a log written by Kafka bumps the epoch once when kcoord reads it.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from operator import attrgetter
from typing import Any, Literal

import re2  # type: ignore[import-untyped]

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import Record

from .. import events as ev
from .. import records as rec
from ..clock import NowMs
from ..group_config import GroupConfig
from ..result import RequestContext, Result
from ..timer import TimerQueue
from .assignors import SERVER_ASSIGNORS, PartitionAssignor
from .group import ConsumerGroup, ResolvedRegularExpression
from .member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
    MemberState,
)
from .reconciliation import FencedMemberEpoch, reconcile
from .store import ConsumerGroups
from .subscriptions import (
    TopicImage,
    assigned_topics_are_subscribed,
    subscribed_topic_ids,
    subscribed_topic_names,
    topic_ids_by_name,
)
from .target_assignment import TargetAssignmentResult, preferred_server_assignor, update_target_assignment

# ConsumerGroupHeartbeat v1 (KIP-1082): the client generates its member id.
CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION = 1
_FILTERED_FROM_LIMIT = 100_000  # regexes' filtered resolutions remembered, over all groups

TopicPartitions = dict[uuid.UUID, set[int]]
# Another group type with the id: none, an Empty classic group (a join replaces it), one in use.
OtherGroup = Literal["none", "empty", "in-use"]


def session_timeout_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("consumer-session", group_id, member_id)


def rebalance_timeout_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("consumer-rebalance", group_id, member_id)


class _SessionExpiry:
    """A member's session timer payload: one small object per member for as long as it lives
    (a closure over the same three values took about three times the memory)."""

    __slots__ = ("manager", "group_id", "member_id")

    def __init__(self, manager: ConsumerGroupManager, group_id: str, member_id: str) -> None:
        self.manager = manager
        self.group_id = group_id
        self.member_id = member_id

    def __call__(self, out: Result) -> None:
        self.manager._on_session_timeout(self.group_id, self.member_id, out)


class HeartbeatError(Exception):
    """The request is refused with this error code and message (Kafka's ApiException)."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _invalid(message: str) -> HeartbeatError:
    return HeartbeatError(ErrorCode.INVALID_REQUEST, message)


def metadata_hash(topic_names: Iterable[str], topics: TopicImage) -> int:
    """kcoord's hash of the subscribed topics that exist: name, id and partition count (0 for none).
    Any change to one of them (a topic created, deleted, recreated or given partitions) changes it."""
    ids = topic_ids_by_name(topics)
    lines = sorted(
        f"{name}\x00{ids[name]}\x00{topics[ids[name]].partition_count}"
        for name in set(topic_names)
        if name in ids
    )
    if not lines:
        return 0
    digest = hashlib.blake2b("\n".join(lines).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _owned(req: m.ConsumerGroupHeartbeatRequest) -> TopicPartitions | None:
    if req.topic_partitions is None:
        return None
    owned: TopicPartitions = {}
    for topic in req.topic_partitions:
        owned.setdefault(topic.topic_id, set()).update(topic.partitions)
    return owned


def _is_subset(owned: TopicPartitions | None, assigned: Mapping[uuid.UUID, Mapping[int, int]]) -> bool:
    """Kafka's ``isSubset``: the client owns only partitions it is assigned (nothing said: no)."""
    if owned is None:
        return False
    return all(p in assigned.get(topic_id, {}) for topic_id, ps in owned.items() for p in ps)


def _assignment(member: ConsumerGroupMember) -> dict[uuid.UUID, frozenset[int]]:
    return {topic_id: frozenset(ps) for topic_id, ps in member.assigned_partitions.items()}


def _response(**fields: Any) -> m.ConsumerGroupHeartbeatResponse:
    """A response without an assignment unless one is set (the class's default is an empty one)."""
    return m.ConsumerGroupHeartbeatResponse(assignment=None, **fields)


def _response_assignment(member: ConsumerGroupMember) -> m.ConsumerGroupHeartbeatResponse.Assignment:
    """Kafka's ``createConsumerGroupResponseAssignment``: the partitions the member owns now."""
    R = m.ConsumerGroupHeartbeatResponse
    return R.Assignment(
        topic_partitions=[
            R.TopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
            for topic_id, partitions in sorted(member.assigned_partitions.items())
        ]
    )


# What the ConsumerGroupMemberMetadata record holds, in the order of the tuple a heartbeat builds.
_SUBSCRIPTION_FIELDS = (
    "instance_id", "rack_id", "client_id", "client_host", "subscribed_topic_names", "subscribed_topic_regex",
    "server_assignor", "rebalance_timeout_ms", "classic_member_metadata",
)  # fmt: skip
_subscription_fields: Callable[[ConsumerGroupMember], tuple[Any, ...]] = attrgetter(*_SUBSCRIPTION_FIELDS)


class ConsumerGroupManager:
    def __init__(
        self,
        config: GroupConfig,
        now_ms: NowMs,
        timers: TimerQueue,
        groups: ConsumerGroups,
        topic_image: Callable[[], TopicImage],
        log: logging.Logger,
        *,
        other_group: Callable[[str], OtherGroup] = lambda group_id: "none",
        new_member_id: Callable[[], str] | None = None,
        upgrade: Callable[[str, list[Record]], ConsumerGroup | None] = lambda group_id, records: None,
        downgrade: Callable[[ConsumerGroup, Iterable[str]], list[Record] | None] = lambda group, leaving: (
            None
        ),
    ) -> None:
        """``topic_image``: the cluster's topics now (read-only). ``other_group``: whether a group
        of another type (a classic group that is not a "simple" one) holds the id, and if it is Empty.
        ``upgrade``: the classic group in use with the id converted (its records appended), as the
        consumer group those records make, or None when it may not be (:mod:`..migration`).
        ``downgrade``: the records that turn the group into a classic group once the members named
        leave, or None when it stays a consumer group."""
        self.config = config
        self.now_ms = now_ms
        self.timers = timers
        self.groups = groups
        self.topic_image = topic_image
        self.log = log
        self.other_group = other_group
        self.upgrade = upgrade
        self.downgrade = downgrade
        self.new_member_id = new_member_id or (lambda: str(uuid.uuid4()))
        self.assignors: dict[str, PartitionAssignor] = {
            name: SERVER_ASSIGNORS[name] for name in config.consumer_assignors if name in SERVER_ASSIGNORS
        } or dict(SERVER_ASSIGNORS)
        self.default_assignor = next(iter(self.assignors))
        self._compiled: dict[str, Any] = {}  # regex -> compiled RE2 pattern (soft state)
        # Events of the request being handled (reported only if it succeeds), and when each group's
        # epoch was last bumped (soft state, for RebalanceCompleted.duration_ms only).
        self._events: list[ev.GroupEvent] = []
        self._bumped_at: dict[str, int] = {}
        # Each group's first epoch bump its members have not all reconciled to yet: (the epoch it
        # bumped to, when). Soft state, for ReconciliationCompleted.duration_ms only; lost on a
        # reload, when the reconciliation under way is then not measured.
        self._unreconciled_since: dict[str, tuple[int, int]] = {}
        # Memos (soft state, see "memos of the topic image"): never read as a record would be.
        self._ids_memo: tuple[TopicImage, dict[str, uuid.UUID]] | None = None
        self._matches_memo: dict[str, tuple[TopicImage, frozenset[str]]] = {}
        # (group, regex) -> the matches its resolution was filtered from under the ACLs (soft state)
        self._filtered_from: dict[tuple[str, str], frozenset[str]] = {}

    # -- the request --------------------------------------------------------------------------------
    def heartbeat(self, ctx: RequestContext, req: m.ConsumerGroupHeartbeatRequest, out: Result) -> None:
        records: list[Record] = []
        self._events.clear()
        try:
            self._validate(req, ctx.api_version)
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                response = self._leave(req, records)
            else:
                response = self._heartbeat(ctx, req, records)
        except HeartbeatError as error:
            self.log.debug(
                "group %s: heartbeat of %s refused: %s", req.group_id, req.member_id, error.message
            )
            ev.emit_fenced(
                out, req.group_id, req.member_id, req.instance_id, error.code, "consumer_group_heartbeat"
            )
            out.reply(ctx, _response(error_code=error.code, error_message=error.message))
            return
        out.records.extend(records)
        if self._events:
            out.events.extend(self._events)
        out.reply(ctx, response)

    def _validate(self, req: m.ConsumerGroupHeartbeatRequest, version: int) -> None:
        epoch = req.member_epoch
        if (
            version >= CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION
            or epoch > 0
            or epoch == LEAVE_GROUP_MEMBER_EPOCH
        ) and req.member_id == "":
            raise _invalid("MemberId can't be empty.")
        if req.group_id == "":
            raise _invalid("GroupId can't be empty.")
        if req.instance_id == "":
            raise _invalid("InstanceId can't be empty.")
        if req.rack_id == "":
            raise _invalid("RackId can't be empty.")
        if epoch == JOIN_GROUP_MEMBER_EPOCH:
            if req.rebalance_timeout_ms == -1:
                raise _invalid("RebalanceTimeoutMs must be provided in first request.")
            if req.topic_partitions is None or req.topic_partitions:
                raise _invalid("TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                raise _invalid(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
                )
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.instance_id is None:
                raise _invalid("InstanceId can't be null.")
        elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise _invalid("MemberEpoch is invalid.")
        if req.server_assignor is not None and req.server_assignor not in self.assignors:
            raise HeartbeatError(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {req.server_assignor} is not supported. "
                f"Supported assignors: {', '.join(self.assignors)}.",
            )

    # -- join and heartbeat -------------------------------------------------------------------------
    def _heartbeat(
        self, ctx: RequestContext, req: m.ConsumerGroupHeartbeatRequest, records: list[Record]
    ) -> m.ConsumerGroupHeartbeatResponse:
        group_id = req.group_id
        joining = req.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        owned = _owned(req)
        group = self._group(group_id, joining, records)

        member_id = req.member_id
        if len(group.members) >= self.config.consumer_max_size and (
            not member_id or member_id not in group.members
        ):
            raise HeartbeatError(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {self.config.consumer_max_size} members.",
            )
        if not member_id:
            member_id = self.new_member_id()

        replaced: ConsumerGroupMember | None = None
        if req.instance_id is None:
            member = self._dynamic_member(group, member_id, req.member_epoch, owned, joining)
        else:
            member, replaced = self._static_member(
                group, member_id, req.member_epoch, req.instance_id, owned, joining
            )
            if replaced is not None:
                self._replace_member(group, replaced, member, records)
        if joining and (replaced is not None or member_id not in group.members):
            self._events.append(
                ev.MemberJoined(
                    group_id,
                    member_id,
                    req.instance_id,
                    ctx.client_id,
                    ctx.client_host,
                    "kip848",
                    rejoin=replaced is not None,
                )
            )

        # 1. The member as the request updates it (null: unchanged). A steady heartbeat changes
        # nothing: the member itself then (it is frozen), not a copy made field by field.
        fields = (
            req.instance_id if req.instance_id is not None else member.instance_id,
            req.rack_id if req.rack_id is not None else member.rack_id,
            ctx.client_id,
            ctx.client_host,
            (
                frozenset(req.subscribed_topic_names) if req.subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
            req.subscribed_topic_regex if req.subscribed_topic_regex is not None else member.subscribed_topic_regex,
            req.server_assignor if req.server_assignor is not None else member.server_assignor,
            req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms,
            None,  # classic_member_metadata: a member heartbeating this way speaks the consumer protocol
        )  # fmt: skip
        if fields == _subscription_fields(member):
            updated = member
        else:
            changes: dict[str, Any] = dict(zip(_SUBSCRIPTION_FIELDS, fields, strict=True))
            updated = replace(member, **changes)
        reconciled, assignment_changed, deferred_ms = self._update_member(
            ctx, group, member, updated, replaced, owned, records
        )

        # Timers last: a refused request leaves them as they were.
        if replaced is not None:
            self._cancel_timers(group_id, replaced.member_id)
        if assignment_changed:
            if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
                self._schedule_rebalance_timeout(
                    group_id, member_id, reconciled.member_epoch, reconciled.rebalance_timeout_ms
                )
            else:
                self.timers.cancel(rebalance_timeout_key(group_id, member_id))
        self._schedule_session_timeout(group_id, member_id)

        # A member whose new target waits for the batch comes back when it can be computed, not a
        # whole heartbeat interval later (every answer carries the interval the client uses next).
        heartbeat_interval_ms = self.config.consumer_heartbeat_interval_ms
        if deferred_ms:
            heartbeat_interval_ms = min(heartbeat_interval_ms, deferred_ms)
        response = _response(
            member_id=member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=heartbeat_interval_ms,
        )
        # Kafka's rule: a full request (a join, or every field a full request carries) or a change
        # of the member's partitions gets the assignment.
        is_full_request = joining or (
            req.rebalance_timeout_ms != -1
            and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
            and owned is not None
        )
        partitions_changed = reconciled.assigned_partitions is not member.assigned_partitions and (
            _assignment(reconciled) != _assignment(member)
        )
        if is_full_request or partitions_changed:
            response.assignment = _response_assignment(reconciled)
        return response

    def _update_member(
        self,
        ctx: RequestContext,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        updated: ConsumerGroupMember,
        replaced: ConsumerGroupMember | None,
        owned: TopicPartitions | None,
        records: list[Record],
    ) -> tuple[ConsumerGroupMember, bool, int]:
        """Steps 1-3 for a member as its request updates it, whichever protocol it speaks (a
        ConsumerGroupHeartbeat, or a classic member's JoinGroup): its subscription record, the group
        epoch, the target assignment, the reconciliation. Returns the member as reconciled, whether
        its current assignment record was written, and how long a new target waits for the batch
        (0: none waits)."""
        now = self.now_ms()
        topics = self.topic_image()
        group_id = group.group_id
        member_id = updated.member_id
        bump = group.group_epoch == 0
        # (The heartbeat hands the member itself over when its request changed none of these.)
        if updated is not member and _subscription_fields(updated) != _subscription_fields(member):
            records.append(rec.consumer_group_member_subscription_record(group_id, updated))
            bump = bump or updated.subscribed_topic_names != member.subscribed_topic_names

        # What the group subscribes to after this heartbeat: read from the group's subscriber
        # counts, so that a heartbeat never walks the members; unchanged, it is remembered.
        removed = () if replaced is None else (replaced,)
        subscription_changed = (
            replaced is not None
            or member_id not in group.members
            or updated.subscribed_topic_names != member.subscribed_topic_names
            or updated.subscribed_regex != member.subscribed_regex
        )
        resolved, regex_changed = self._resolve_regular_expressions(
            group, removed, updated, topics, now, records, ctx.topic_describable
        )
        bump = bump or regex_changed
        if subscription_changed or resolved is not group.resolved_regular_expressions:
            new_hash = metadata_hash(group.subscribed_names_after(resolved, removed, updated), topics)
        else:
            new_hash = self._metadata_hash_of(group, topics)
        bump = bump or new_hash != group.metadata_hash
        group_epoch = group.group_epoch
        if bump:
            group_epoch += 1
            if group.has_subscription_metadata_record:
                records.append(rec.consumer_group_subscription_metadata_tombstone(group_id))
            records.append(rec.consumer_group_epoch_record(group_id, group_epoch, new_hash))
            self.log.info("group %s: bumped the group epoch to %d", group_id, group_epoch)
            new_member = member_id not in group.members and replaced is None
            self._rebalance_started(
                group,
                "member_joined" if new_member else "metadata_changed",
                len(group.members) + new_member,
                now,
            )

        # 2. The target assignment: a new one when the group epoch is ahead of it, in this heartbeat
        # (so a joining member gets its partitions in this answer), batched to once per assignment
        # interval (KIP-1263) in a large group; until then the member reconciles to the last one.
        members_after = len(group.members) + (member_id not in group.members and replaced is None)
        deferred_ms = 0
        if group_epoch > group.target_assignment_epoch:
            deferred_ms = self._assignment_deferred_ms(group, members_after, now)
        if group_epoch > group.target_assignment_epoch and deferred_ms == 0:
            target_result = update_target_assignment(
                group, group_epoch, topics, now_ms=now, updated_member=updated,
                assignors=self.assignors, default_assignor=self.default_assignor,
                resolved_regular_expressions=resolved,
            )  # fmt: skip
            records.extend(target_result.records)
            target_epoch = group_epoch
            self._assignment_computed(group, group_epoch, target_result, topics, now)
            target = target_result.of(member_id)
        else:
            target_epoch = group.target_assignment_epoch
            target = group.target_assignment.get(member_id) or (
                group.target_assignment_of(replaced.member_id) if replaced is not None else {}
            )

        # 3. Reconcile the member towards its target.
        ids_by_name = self._ids_by_name(topics)
        consistent = assigned_topics_are_subscribed(
            updated, subscribed_topic_names(updated, resolved), topics, ids_by_name
        )
        reconciled = updated
        if not (consistent and updated.is_reconciled_to(target_epoch)):
            subscribed = subscribed_topic_ids(updated, resolved, ids_by_name)
            try:
                reconciled = reconcile(
                    updated,
                    target_assignment_epoch=target_epoch,
                    target_assignment=target,
                    owned_partitions=owned,
                    current_partition_epoch=group.current_partition_epoch,
                    subscribed_topic_ids=subscribed,
                    enforce_subscription_consistency=not consistent,
                )
            except FencedMemberEpoch as error:
                raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH, str(error)) from None
        assignment_changed = (reconciled is not updated and reconciled != updated) or (
            replaced is None and member_id not in group.members
        )
        if assignment_changed:
            records.append(rec.consumer_group_current_assignment_record(group_id, reconciled))
        if group_id in self._unreconciled_since:
            self._maybe_reconciled(group, reconciled, replaced, group_epoch, target_epoch, now)
        return reconciled, assignment_changed, deferred_ms

    def _assignment_deferred_ms(self, group: ConsumerGroup, members_after: int, now: int) -> int:
        """How long the group's new target assignment waits for the batch: 0 computes it now.

        Now when the interval is 0, the group has no target yet, it has fewer than
        ``group.consumer.assignment.batch.min.members`` members after this heartbeat (an assignor
        run over a small group costs little: Kafka 4.0 computes on every bump), or the interval has
        passed since the last target (its ConsumerGroupTargetAssignmentMetadata's timestamp), or
        that timestamp is in the future (a clock that went back: no waiting for it to catch up).
        Otherwise the time left until the interval has passed: members joining together in a
        large group share one assignor run."""
        interval = self.config.consumer_assignment_interval_ms
        last = group.assignment_timestamp_ms
        if (
            interval <= 0
            or group.target_assignment_epoch <= 0
            or members_after < self.config.consumer_assignment_batch_min_members
            or not last <= now < last + interval
        ):
            return 0
        return last + interval - now

    def _group(self, group_id: str, create: bool, records: list[Record]) -> ConsumerGroup:
        """Kafka's ``getOrMaybeCreateConsumerGroup``: a join may create the group (not yet in the
        store: its records create it when replayed), in place of an Empty classic group, whose
        tombstone goes first (``maybeDeleteEmptyClassicGroup``). A join to a classic group in use
        converts it when the migration policy allows (Kafka's ``convertToConsumerGroup``); otherwise,
        and for any other request, the classic group keeps the id: GROUP_ID_NOT_FOUND."""
        group = self.groups.get(group_id)
        if group is not None:
            return group
        other = self.other_group(group_id)
        if other == "empty" and create:
            self.log.info("group %s: the Empty classic group becomes a consumer group", group_id)
            records.append(rec.group_tombstone(group_id))
        elif other == "in-use" and create:
            converted = self.upgrade(group_id, records)
            if converted is None:
                raise HeartbeatError(
                    ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group."
                )
            return converted
        elif other != "none":
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if not create:
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        return ConsumerGroup(group_id)

    def _dynamic_member(
        self, group: ConsumerGroup, member_id: str, epoch: int, owned: TopicPartitions | None, joining: bool
    ) -> ConsumerGroupMember:
        member = group.members.get(member_id)
        if member is None:
            if not joining:
                raise HeartbeatError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {member_id} is not a member of group {group.group_id}.",
                )
            self.log.info("group %s: member %s joins", group.group_id, member_id)
            return ConsumerGroupMember(member_id)
        self._check_member_epoch(member, epoch, owned)
        return member

    def _static_member(
        self,
        group: ConsumerGroup,
        member_id: str,
        epoch: int,
        instance_id: str,
        owned: TopicPartitions | None,
        joining: bool,
    ) -> tuple[ConsumerGroupMember, ConsumerGroupMember | None]:
        """Kafka's ``getOrMaybeSubscribeStaticConsumerGroupMember``: the member, and the one it
        replaces (a static member that left with epoch -2, or a classic static member, whose
        instance id joins under a new member id)."""
        existing_id = group.static_member_id(instance_id)
        existing = None if existing_id is None else group.members.get(existing_id)
        if joining:
            if existing is None:
                self.log.info("group %s: static member %s (%s) joins", group.group_id, member_id, instance_id)
                return group.members.get(member_id) or ConsumerGroupMember(member_id), None
            # Only a consumer-protocol holder must have left (epoch -2) first: a classic one is
            # replaced at once, as Kafka does, since a classic static member restarting (here, to
            # speak the consumer protocol in a rolling upgrade) sends no LeaveGroup.
            if (
                existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH
                and not existing.uses_classic_protocol
            ):
                raise HeartbeatError(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance_id} cannot join the group because "
                    f"the instance id is owned by {existing.member_id} member.",
                )
            self.log.info(
                "group %s: static member %s rejoins as %s, replacing %s",
                group.group_id, instance_id, member_id, existing.member_id,
            )  # fmt: skip
            return existing.replaced_by(member_id), existing
        existing = _static_holder(group, instance_id, member_id)
        self._check_member_epoch(existing, epoch, owned)
        return existing, None

    def _check_member_epoch(
        self, member: ConsumerGroupMember, epoch: int, owned: TopicPartitions | None
    ) -> None:
        """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid``: the member's epoch, or its previous
        one when the client owns only partitions it is assigned (the response that bumped it may
        have been lost). Epoch 0 is a rejoin, always accepted (KAFKA-19233)."""
        if epoch == JOIN_GROUP_MEMBER_EPOCH:
            return
        if epoch > member.member_epoch:
            raise HeartbeatError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a greater member epoch ({epoch}) than the one known by the group "
                f"coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
            )
        if epoch < member.member_epoch and (
            epoch != member.previous_member_epoch or not _is_subset(owned, member.assigned_partitions)
        ):
            raise HeartbeatError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a smaller member epoch ({epoch}) than the one known by the group "
                f"coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
            )

    def _replace_member(
        self, group: ConsumerGroup, old: ConsumerGroupMember, new: ConsumerGroupMember, records: list[Record]
    ) -> None:
        """Kafka's ``replaceMember``: the old member's tombstones, then the new member with the old
        one's subscription, target assignment and current assignment."""
        group_id = group.group_id
        records.extend(rec.consumer_group_member_tombstones(group_id, old.member_id))
        records.append(rec.consumer_group_member_subscription_record(group_id, new))
        records.append(
            rec.consumer_group_target_assignment_record(
                group_id, new.member_id, group.target_assignment_of(old.member_id)
            )
        )
        records.append(rec.consumer_group_current_assignment_record(group_id, new))

    # -- memos of the topic image ------------------------------------------------------------------
    # The image is replaced, never changed in place, when the cluster's topics change: what is
    # derived from it is kept until the next image (an identity check per heartbeat).
    def _ids_by_name(self, topics: TopicImage) -> Mapping[str, uuid.UUID]:
        memo = self._ids_memo
        if memo is None or memo[0] is not topics:
            memo = self._ids_memo = (topics, topic_ids_by_name(topics))
        return memo[1]

    def _metadata_hash_of(self, group: ConsumerGroup, topics: TopicImage) -> int:
        """The metadata hash of what ``group`` subscribes to now, remembered per group until its
        subscriptions or the image change."""
        memo = group.metadata_hash_memo
        if memo is not None and memo[0] == group.subscriptions_version and memo[1] is topics:
            return memo[2]
        value = metadata_hash(group.subscribed_topic_names(), topics)
        group.metadata_hash_memo = (group.subscriptions_version, topics, value)
        return value

    def _matching_topics(self, regex: str, topics: TopicImage) -> frozenset[str]:
        memo = self._matches_memo.get(regex)
        if memo is not None and memo[0] is topics:
            return memo[1]
        pattern = self._compile(regex)
        matched = frozenset(meta.name for meta in topics.values() if pattern.fullmatch(meta.name) is not None)
        if len(self._matches_memo) > 10_000:
            self._matches_memo.clear()
        self._matches_memo[regex] = (topics, matched)
        return matched

    # -- regular expressions ------------------------------------------------------------------------
    def _resolve_regular_expressions(
        self,
        group: ConsumerGroup,
        removed: tuple[ConsumerGroupMember, ...],
        updated: ConsumerGroupMember,
        topics: TopicImage,
        now: int,
        records: list[Record],
        describable: Callable[[str], bool] | None = None,
    ) -> tuple[Mapping[str, ResolvedRegularExpression], bool]:
        """The group's resolved regular expressions after this heartbeat (the group's own mapping
        when nothing changes), and whether one that a member subscribes with resolved to other
        topics than before. Writes a record for each new or changed resolution and a tombstone for
        each regular expression nobody subscribes with any more.

        With ``describable`` (the heartbeating member's DESCRIBE right on topics, under the
        upstream's ACLs) a resolution keeps only the topics it allows, as Kafka resolves a group's
        regular expressions in the context of the member whose heartbeat asked for it. It is done
        again only when the topics matched change, not at every member's heartbeat: members with
        different rights would otherwise turn the resolution back and forth, a rebalance each time.
        """
        if updated.subscribed_regex is not None:
            self._compile(updated.subscribed_regex)  # refused before anything else if it does not compile
        wanted = group.subscribed_regexes_after(removed, updated)
        current = group.resolved_regular_expressions
        if not wanted and not current:
            return current, False
        resolved = dict(current)
        changed = False
        for regex in sorted(resolved.keys() - wanted):
            records.append(rec.consumer_group_regular_expression_tombstone(group.group_id, regex))
            del resolved[regex]
            self._filtered_from.pop((group.group_id, regex), None)
        for regex in sorted(wanted):
            matched = self._matching_topics(regex, topics)
            old = resolved.get(regex)
            if describable is not None:
                source_key = (group.group_id, regex)
                prior = self._filtered_from.get(source_key)
                if old is not None and prior is not None and (prior is matched or prior == matched):
                    continue  # resolved from these very matches already, with some member's rights
                if len(self._filtered_from) >= _FILTERED_FROM_LIMIT:
                    self._filtered_from.clear()  # soft state: at worst one resolution more per regex
                self._filtered_from[source_key] = matched
                matched = frozenset(topic for topic in matched if describable(topic))
            if old is not None and old.topics == matched:
                continue
            new = ResolvedRegularExpression(topics=matched, version=0, timestamp_ms=now)
            records.append(rec.consumer_group_regular_expression_record(group.group_id, regex, new))
            resolved[regex] = new
            changed = changed or old is not None or bool(matched)
        if resolved == current:
            return current, False
        return resolved, changed

    def _compile(self, regex: str) -> Any:
        pattern = self._compiled.get(regex)
        if pattern is None:
            options = re2.Options()
            options.log_errors = False
            try:
                pattern = re2.compile(regex, options)
            except re2.error as error:
                raise HeartbeatError(
                    ErrorCode.INVALID_REGULAR_EXPRESSION,
                    f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {error}.",
                ) from None
            if len(self._compiled) > 10_000:
                self._compiled.clear()
            self._compiled[regex] = pattern
        return pattern

    # -- leave and fence ----------------------------------------------------------------------------
    def _leave(
        self, req: m.ConsumerGroupHeartbeatRequest, records: list[Record]
    ) -> m.ConsumerGroupHeartbeatResponse:
        """Kafka's ``consumerGroupLeave``."""
        group_id, member_id, instance_id = req.group_id, req.member_id, req.instance_id
        group = self.groups.get(group_id)
        if group is None:
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        response = _response(member_id=member_id, member_epoch=req.member_epoch)
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise HeartbeatError(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}."
                )
            self.log.info("group %s: member %s left", group_id, member_id)
            self._events.append(ev.MemberLeft(group_id, member_id, None, "leave_group"))
            records.extend(self.fence_member_records(group, member, "member_left"))
            return response
        member = _static_holder(group, instance_id, member_id)
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # It keeps its partitions for a while; its session timeout still runs.
            self.log.info("group %s: static member %s (%s) left for now", group_id, member_id, instance_id)
            records.append(rec.consumer_group_current_assignment_record(group_id, member.as_static_leave()))
            return _response(member_id=member.member_id, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH)
        self.log.info("group %s: static member %s (%s) left", group_id, member_id, instance_id)
        self._events.append(ev.MemberLeft(group_id, member.member_id, instance_id, "leave_group"))
        records.extend(self.fence_member_records(group, member, "member_left"))
        return response

    def fence_member_records(
        self, group: ConsumerGroup, member: ConsumerGroupMember, reason: str | None = None
    ) -> list[Record]:
        """Kafka's ``consumerGroupFenceMember``: the member's tombstones (and its regular expression's,
        if it was the last to use it), then the group epoch bumped with the metadata hash of the
        topics the others subscribe to; or, when only classic members remain and the migration
        policy allows, the records that turn the group into a classic group. Cancels the member's
        timers."""
        group_id = group.group_id
        downgraded = self.downgrade(group, (member.member_id,))
        if downgraded is not None:
            self._cancel_timers(group_id, member.member_id)
            self._unreconciled_since.pop(group_id, None)  # a classic group from now on
            return downgraded
        records = rec.consumer_group_member_tombstones(group_id, member.member_id)
        resolved = dict(group.resolved_regular_expressions)
        regex = member.subscribed_regex
        if regex is not None and regex in resolved and group.subscribed_regex_count(regex) <= 1:
            records.append(rec.consumer_group_regular_expression_tombstone(group_id, regex))
            del resolved[regex]
        topics = self.topic_image()
        if group.has_subscription_metadata_record:
            records.append(rec.consumer_group_subscription_metadata_tombstone(group_id))
        new_hash = metadata_hash(group.subscribed_names_after(resolved, removed=(member,)), topics)
        records.append(rec.consumer_group_epoch_record(group_id, group.group_epoch + 1, new_hash))
        self._cancel_timers(group_id, member.member_id)
        if reason is not None:
            self._rebalance_started(group, reason, len(group.members) - 1, self.now_ms())
        return records

    # -- events (reported by the shard runtime; never read back) ----------------------------------------
    def _rebalance_started(self, group: ConsumerGroup, reason: str, members: int, now: int) -> None:
        group_id = group.group_id
        self._bumped_at[group_id] = now
        if members > 0:
            since = self._unreconciled_since.get(group_id)
            # A start whose bump is not in the group was never written (its request was refused
            # after it): this bump starts the reconciliation.
            if since is None or since[0] > group.group_epoch:
                self._forget_reconciliations_of_gone_groups()
                self._unreconciled_since[group_id] = (group.group_epoch + 1, now)
        else:
            self._unreconciled_since.pop(group_id, None)  # nobody left to reconcile
        self._events.append(
            ev.RebalanceStarted(group_id, reason, group.group_epoch, members, group_type="consumer")
        )

    def _maybe_reconciled(
        self,
        group: ConsumerGroup,
        reconciled: ConsumerGroupMember,
        replaced: ConsumerGroupMember | None,
        group_epoch: int,
        target_epoch: int,
        now: int,
    ) -> None:
        """Report the end of the group's reconciliation when this request's member, as ``reconciled``,
        is the last one to reach the target of the group epoch. Decided from the group as it was
        before this request and what the request changes, in O(1): the group's count of unreconciled
        members, less this member's (and a replaced static member's) part in it; a target computed
        in this very request leaves every other member on an older epoch."""
        if target_epoch != group_epoch or not reconciled.is_reconciled_to(group_epoch):
            return
        member_id = reconciled.member_id
        previous = group.members.get(member_id)
        gone = None if replaced is None else group.members.get(replaced.member_id)
        before = [m for m in (previous, gone) if m is not None]
        if target_epoch != group.target_assignment_epoch:
            others_unreconciled = len(group.members) - len(before)
        else:
            others_unreconciled = group.unreconciled_members - sum(
                not m.is_reconciled_to(target_epoch) for m in before
            )
        if others_unreconciled > 0:
            return
        _, started = self._unreconciled_since.pop(group.group_id)
        members = len(group.members) - len(before) + 1
        self._events.append(
            ev.ReconciliationCompleted(group.group_id, group_epoch, max(0, now - started), members)
        )

    def _forget_reconciliations_of_gone_groups(self) -> None:
        """Bound the soft state: a group deleted, or converted to a classic group, while its
        members reconciled leaves its start behind. Every group with a start is in the store (its
        records are replayed before the next request), so more starts than groups, by a margin that
        keeps the walk rare, means some are gone."""
        if len(self._unreconciled_since) > len(self.groups.groups) + 64:
            for group_id in [g for g in self._unreconciled_since if self.groups.get(g) is None]:
                del self._unreconciled_since[group_id]

    def _assignment_computed(
        self, group: ConsumerGroup, epoch: int, result: TargetAssignmentResult, topics: TopicImage, now: int
    ) -> None:
        names = {topic_id: name for name, topic_id in self._ids_by_name(topics).items()}
        members = []
        for member_id, target in result.assignment.items():
            holder = group.members.get(member_id)
            pairs: list[tuple[str, int]] = []
            for topic_id, parts in target.items():
                # Not names.get(topic_id, str(topic_id)): that formats the id for every partition
                # (2% of a 20,000-member join and leave's CPU).
                name = names.get(topic_id)
                if name is None:
                    name = str(topic_id)
                pairs.extend((name, p) for p in parts)
            partitions = tuple(sorted(pairs))
            members.append(
                ev.MemberAssignment(member_id, holder.instance_id if holder else None, None, partitions)
            )
        assignor = preferred_server_assignor(group.members.values(), self.assignors, self.default_assignor)
        started = self._bumped_at.pop(group.group_id, now)
        self._events.append(ev.AssignmentComputed(group.group_id, epoch, "kip848", assignor, tuple(members)))
        self._events.append(
            ev.RebalanceCompleted(
                group.group_id, epoch, max(0, now - started), len(members), assignor, group_type="consumer"
            )
        )

    # -- timers -------------------------------------------------------------------------------------
    def _schedule_session_timeout(self, group_id: str, member_id: str, timeout_ms: int | None = None) -> None:
        """Kafka's ``scheduleConsumerGroupSessionTimeout``: re-armed by every heartbeat."""
        group = self.groups.get(group_id)
        if group is not None:
            # The timer lives as long as the member: it keeps the group's id object rather than
            # the copy this request decoded, one per member.
            group_id = group.group_id
        key = session_timeout_key(group_id, member_id)
        deadline = self.now_ms() + (
            self.config.consumer_session_timeout_ms if timeout_ms is None else timeout_ms
        )
        if not self.timers.push_back(key, deadline):
            self.timers.schedule(key, deadline, _SessionExpiry(self, group_id, member_id))

    def _schedule_rebalance_timeout(
        self, group_id: str, member_id: str, member_epoch: int, timeout_ms: int
    ) -> None:
        """Kafka's ``scheduleConsumerGroupRebalanceTimeout``: the member must have revoked its
        partitions, and left ``member_epoch``, within its rebalance timeout."""
        self.timers.schedule(
            rebalance_timeout_key(group_id, member_id),
            self.now_ms() + max(timeout_ms, 0),
            lambda out: self._on_rebalance_timeout(group_id, member_id, member_epoch, out),
        )

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        self.timers.cancel(session_timeout_key(group_id, member_id))
        self.timers.cancel(rebalance_timeout_key(group_id, member_id))

    def _on_session_timeout(self, group_id: str, member_id: str, out: Result) -> None:
        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if group is None or member is None:
            return
        self.log.info("group %s: member %s fenced, its session expired", group_id, member_id)
        self._events.clear()
        out.emit(
            ev.MemberExpired(group_id, member_id, member.instance_id, self.config.consumer_session_timeout_ms)
        )
        out.records.extend(self.fence_member_records(group, member, "member_expired"))
        out.events.extend(self._events)

    def _on_rebalance_timeout(self, group_id: str, member_id: str, member_epoch: int, out: Result) -> None:
        group = self.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if group is None or member is None or member.member_epoch != member_epoch:
            return
        self.log.info(
            "group %s: member %s fenced, it did not leave epoch %d within its rebalance timeout (%d ms)",
            group_id, member_id, member_epoch, member.rebalance_timeout_ms,
        )  # fmt: skip
        self._events.clear()
        out.emit(ev.MemberExpired(group_id, member_id, member.instance_id, member.rebalance_timeout_ms))
        out.records.extend(self.fence_member_records(group, member, "member_expired"))
        out.events.extend(self._events)

    def on_loaded(self) -> None:
        """Kafka's ``onLoaded`` for consumer groups: every member's session timeout, and the
        rebalance timeout of each member still revoking partitions."""
        for group in self.groups.groups.values():
            for member in group.members.values():
                classic = member.classic_member_metadata
                self._schedule_session_timeout(
                    group.group_id, member.member_id, None if classic is None else classic.session_timeout_ms
                )
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_rebalance_timeout(
                        group.group_id, member.member_id, member.member_epoch, member.rebalance_timeout_ms
                    )


def _static_holder(group: ConsumerGroup, instance_id: str, member_id: str) -> ConsumerGroupMember:
    """The member holding ``instance_id``, which must be ``member_id`` (Kafka's checks that a static
    member is known and not fenced, for a heartbeat and for a leave alike)."""
    holder_id = group.static_member_id(instance_id)
    holder = None if holder_id is None else group.members.get(holder_id)
    if holder is None:
        raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
    if holder.member_id != member_id:
        raise HeartbeatError(
            ErrorCode.FENCED_INSTANCE_ID,
            f"Static member {member_id} with instance id {instance_id} was fenced by member {holder.member_id}.",
        )
    return holder
