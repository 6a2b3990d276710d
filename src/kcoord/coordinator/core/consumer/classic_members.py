"""Classic-protocol members inside a consumer group (KIP-848's online migration), as Kafka 4.0 serves them:
JoinGroup, SyncGroup, Heartbeat and LeaveGroup from a member that speaks the classic protocol to a
group that is a consumer group (Kafka's ``classicGroupJoinToConsumerGroup`` and its siblings).

Such a member is an ordinary consumer group member whose ConsumerGroupMemberMetadata carries
``ClassicMemberMetadata`` (session timeout, protocols). The server-side assignor decides its
partitions like anyone else's; the classic requests map onto the consumer protocol this way:

- JoinGroup updates the member (subscription and owned partitions decoded from its first
  protocol's ConsumerProtocol metadata), bumps the epoch if its subscription changed, computes the
  target and reconciles exactly as a ConsumerGroupHeartbeat does, and answers at once with the
  member's epoch as the generation. The member is never the leader: the coordinator assigns.
- SyncGroup hands back the partitions the member owns now, in the ConsumerProtocolAssignment
  format of the member's metadata version. Partitions it must give up are not in it, and partitions
  another member still holds are not either: revoke before assign holds for eager and cooperative
  clients alike (an eager client gave up everything before it rejoined).
- Heartbeat answers REBALANCE_IN_PROGRESS while the member has to rejoin: the group epoch moved
  past it, it must revoke partitions, or partitions it waits for were released.
- LeaveGroup removes the member (bumping the epoch), or converts the group back to a classic group
  when only classic members would remain (:mod:`..migration`).

A generation is the member epoch: a mismatch is ILLEGAL_GENERATION (and so are offset commits, see
:mod:`.commit_fencing`). Timers: the classic session timeout; after a JoinGroup the member must sync
within its rebalance timeout, and after being told to rejoin it must rejoin within it, or it is fenced.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import Record

from .. import events as ev
from .. import migration
from .. import records as rec
from .. import responses as r
from ..group_config import GroupConfig
from ..result import RequestContext, Result
from .group import ConsumerGroup
from .manager import ConsumerGroupManager, HeartbeatError
from .member import ConsumerGroupMember, MemberState
from .reconciliation import FencedMemberEpoch

# JoinGroup v4+: a member without an id is given one and asked to join again with it (KIP-394).
MEMBER_ID_REQUIRED_VERSION = 4


def sync_timeout_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("consumer-classic-sync", group_id, member_id)


def join_timeout_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("consumer-classic-join", group_id, member_id)


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _classic_member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
    """Kafka's ``validateConsumerGroupMember`` and ``throwIfMemberDoesNotUseClassicProtocol``."""
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of the group.")
    else:
        holder = group.static_member_id(instance_id)
        member = None if holder is None else group.members.get(holder)
        if member is None:
            raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if member.member_id != member_id:
            raise _Refused(
                ErrorCode.FENCED_INSTANCE_ID, f"Instance id {instance_id} is owned by another member."
            )
    if not member.uses_classic_protocol:
        raise _Refused(
            ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member.member_id} does not use the classic protocol."
        )
    return member


def _check_generation(member: ConsumerGroupMember, generation_id: int) -> None:
    if member.member_epoch != generation_id:
        raise _Refused(
            ErrorCode.ILLEGAL_GENERATION,
            f"The member's generation {generation_id} is not its epoch {member.member_epoch}.",
        )


def waits_on_unreleased_partition(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """Kafka's ``waitingOnUnreleasedPartition``: a partition of the member's target that it does not
    own yet is still owned by another member."""
    for topic_id, partitions in group.target_assignment_of(member.member_id).items():
        owned = member.assigned_partitions.get(topic_id, {})
        for partition in partitions:
            if partition not in owned and group.current_partition_epoch(topic_id, partition) != -1:
                return True
    return False


class ClassicMembersOfConsumerGroups:
    def __init__(
        self,
        config: GroupConfig,
        manager: ConsumerGroupManager,
        log: logging.Logger,
        downgrade_replacing: Callable[[ConsumerGroup, str, ConsumerGroupMember], list[Record] | None] = (
            lambda group, replaced_id, joining: None
        ),
        new_member_id: Callable[[str], str] | None = None,
    ) -> None:
        """``downgrade_replacing``: the records that turn the group into a classic group when a classic
        static member replaces its last consumer-protocol member, or None (:mod:`..migration_steps`).
        ``new_member_id``: a classic member's new id from its client or instance id (the shard's, as
        for classic groups); by default the consumer manager's."""
        self.config = config
        self.manager = manager
        self.log = log
        self.downgrade_replacing = downgrade_replacing
        self.new_member_id = new_member_id or (lambda prefix: manager.new_member_id())

    # -- JoinGroup -------------------------------------------------------------------------------------
    def join(self, ctx: RequestContext, req: m.JoinGroupRequest, group: ConsumerGroup, out: Result) -> None:
        version = ctx.api_version
        records: list[Record] = []
        self.manager._events.clear()
        try:
            response = self._join(ctx, req, group, records)
        except (_Refused, HeartbeatError) as error:
            self.log.info("group %s: JoinGroup of %r refused: %s", group.group_id, req.member_id, error)
            out.reply(ctx, r.join_response(version, error.code, member_id=req.member_id))
            return
        out.records.extend(records)
        out.events.extend(self.manager._events)
        out.reply(ctx, response)

    def _join(
        self, ctx: RequestContext, req: m.JoinGroupRequest, group: ConsumerGroup, records: list[Record]
    ) -> m.JoinGroupResponse:
        version = ctx.api_version
        group_id = group.group_id
        protocols = [(p.name, p.metadata) for p in req.protocols]
        if not self._supports(group, req.protocol_type, {name for name, _ in protocols}):
            raise _Refused(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "The member's protocols are not supported.")
        member_id = req.member_id
        known = member_id in group.members or (
            req.group_instance_id is not None and group.static_member_id(req.group_instance_id) is not None
        )
        if len(group.members) >= self.config.consumer_max_size and not known:
            raise _Refused(ErrorCode.GROUP_MAX_SIZE_REACHED, "The consumer group is full.")
        try:
            subscription = migration.decode_subscription(protocols[0][1])
        except migration.MalformedEmbeddedProtocol as error:
            raise _Refused(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"Malformed subscription: {error}"
            ) from None

        replaced: ConsumerGroupMember | None = None
        if req.group_instance_id is None:
            if member_id == "":
                member_id = self.new_member_id(ctx.client_id)
                if version >= MEMBER_ID_REQUIRED_VERSION:
                    return r.join_response(version, ErrorCode.MEMBER_ID_REQUIRED, member_id=member_id)
            member = group.members.get(member_id) or ConsumerGroupMember(member_id)
        else:
            instance_id = req.group_instance_id
            holder_id = group.static_member_id(instance_id)
            holder = None if holder_id is None else group.members.get(holder_id)
            if member_id == "":
                member_id = self.new_member_id(instance_id)
                if holder is None:
                    member = ConsumerGroupMember(member_id)
                else:
                    # The static member comes back under a new id and takes its place, partitions kept.
                    replaced, member = holder, holder.replaced_by(member_id)
                    self.manager._replace_member(group, holder, member, records)
            elif holder is None:
                raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
            elif holder.member_id != member_id:
                raise _Refused(
                    ErrorCode.FENCED_INSTANCE_ID, f"Instance id {instance_id} is owned by another member."
                )
            else:
                member = holder
        new = replaced is not None or member_id not in group.members
        if new:
            self.log.info("group %s: classic member %s joins the consumer group", group_id, member_id)
            joined: ev.GroupEvent = ev.MemberJoined(
                group_id, member_id, req.group_instance_id, ctx.client_id, ctx.client_host,
                migration.CONSUMER_PROTOCOL_TYPE, rejoin=replaced is not None,
            )  # fmt: skip
        rebalance_timeout = req.rebalance_timeout_ms if version >= 1 else req.session_timeout_ms
        updated = replace(
            member,
            instance_id=req.group_instance_id if req.group_instance_id is not None else member.instance_id,
            rack_id=subscription.rack_id if subscription.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=rebalance_timeout,
            subscribed_topic_names=frozenset(subscription.topics),
            client_id=ctx.client_id,
            client_host=ctx.client_host,
            classic_member_metadata=migration.classic_metadata(req.session_timeout_ms, protocols),
        )
        owned = migration.owned_partitions(subscription, self.manager.topic_image())
        try:
            reconciled, _, _ = self.manager._update_member(
                ctx, group, member, updated, replaced, owned, records
            )
        except FencedMemberEpoch as error:
            raise _Refused(ErrorCode.FENCED_MEMBER_EPOCH, str(error)) from None

        generation = reconciled.member_epoch
        downgraded = None
        if replaced is not None and not replaced.uses_classic_protocol:
            downgraded = self.downgrade_replacing(group, replaced.member_id, reconciled)
        if downgraded is not None:
            records.extend(downgraded)
            generation = group.group_epoch

        # Timers last: a refused request leaves them as they were.
        timers = self.manager.timers
        if replaced is not None:
            self.manager._cancel_timers(group_id, replaced.member_id)
            self._cancel_classic_timers(group_id, replaced.member_id)
        timers.cancel(join_timeout_key(group_id, member_id))
        if downgraded is None:
            self.manager._schedule_session_timeout(group_id, member_id, req.session_timeout_ms)
            self._schedule_fence(
                sync_timeout_key(group_id, member_id), group_id, member_id, rebalance_timeout
            )
        if new:
            self.manager._events.append(joined)
        return r.join_response(
            version,
            member_id=member_id,
            generation_id=generation,
            protocol_type=migration.CONSUMER_PROTOCOL_TYPE,
            protocol_name=protocols[0][0],
            leader="",
        )

    @staticmethod
    def _supports(group: ConsumerGroup, protocol_type: str, names: set[str]) -> bool:
        """Kafka's ``ConsumerGroup.supportsClassicProtocols``: the consumer protocol type, and a
        protocol every classic member already in the group supports too."""
        if protocol_type != migration.CONSUMER_PROTOCOL_TYPE or not names:
            return False
        classic = [mm.classic_member_metadata for mm in group.members.values() if mm.classic_member_metadata]
        return not classic or any(
            all(name in {n for n, _ in c.supported_protocols} for c in classic) for name in names
        )

    # -- SyncGroup -------------------------------------------------------------------------------------
    def sync(self, ctx: RequestContext, req: m.SyncGroupRequest, group: ConsumerGroup, out: Result) -> None:
        try:
            member = _classic_member(group, req.member_id, req.group_instance_id)
            _check_generation(member, req.generation_id)
            classic = member.classic_member_metadata
            assert classic is not None
            names = [name for name, _ in classic.supported_protocols]
            if (req.protocol_type is not None and req.protocol_type != migration.CONSUMER_PROTOCOL_TYPE) or (
                req.protocol_name is not None and req.protocol_name not in names
            ):
                raise _Refused(
                    ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "The protocol does not match the member's."
                )
            if (
                group.group_epoch > member.member_epoch
                and member.state is not MemberState.UNREVOKED_PARTITIONS
            ):
                self._schedule_fence(
                    join_timeout_key(group.group_id, member.member_id), group.group_id, member.member_id,
                    member.rebalance_timeout_ms, replace_existing=False,
                )  # fmt: skip
                raise _Refused(ErrorCode.REBALANCE_IN_PROGRESS, "The group is rebalancing: rejoin.")
        except _Refused as error:
            ev.emit_fenced(
                out, group.group_id, req.member_id, req.group_instance_id, error.code, "sync_group"
            )
            out.reply(ctx, r.sync_response(error.code))
            return
        self.manager.timers.cancel(sync_timeout_key(group.group_id, member.member_id))
        self.manager._schedule_session_timeout(group.group_id, member.member_id, classic.session_timeout_ms)
        metadata = classic.supported_protocols[0][1]
        try:
            metadata_version = migration.embedded_version(metadata)
        except migration.MalformedEmbeddedProtocol:
            metadata_version = 0
        assignment = migration.encode_assignment(
            member.assigned_partitions, self.manager.topic_image(), metadata_version
        )
        out.reply(
            ctx,
            r.sync_response(
                protocol_type=req.protocol_type, protocol_name=req.protocol_name, assignment=assignment
            ),
        )

    # -- Heartbeat -------------------------------------------------------------------------------------
    def heartbeat(
        self, ctx: RequestContext, req: m.HeartbeatRequest, group: ConsumerGroup, out: Result
    ) -> None:
        try:
            member = _classic_member(group, req.member_id, req.group_instance_id)
            _check_generation(member, req.generation_id)
        except _Refused as error:
            ev.emit_fenced(out, group.group_id, req.member_id, req.group_instance_id, error.code, "heartbeat")
            out.reply(ctx, r.heartbeat_response(error.code))
            return
        classic = member.classic_member_metadata
        assert classic is not None
        self.manager._schedule_session_timeout(group.group_id, member.member_id, classic.session_timeout_ms)
        if (
            member.member_epoch < group.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (
                member.state is MemberState.UNRELEASED_PARTITIONS
                and not waits_on_unreleased_partition(group, member)
            )
        ):
            self._schedule_fence(
                join_timeout_key(group.group_id, member.member_id), group.group_id, member.member_id,
                member.rebalance_timeout_ms, replace_existing=False,
            )  # fmt: skip
            out.reply(ctx, r.heartbeat_response(ErrorCode.REBALANCE_IN_PROGRESS))
            return
        out.reply(ctx, r.heartbeat_response(ErrorCode.NONE))

    # -- LeaveGroup ------------------------------------------------------------------------------------
    def leave(self, ctx: RequestContext, req: m.LeaveGroupRequest, group: ConsumerGroup, out: Result) -> None:
        version = ctx.api_version
        identities = (
            [(req.member_id, None)]
            if version <= 2
            else [(i.member_id, i.group_instance_id) for i in req.members]
        )
        responses: list[m.LeaveGroupResponse.MemberResponse] = []
        leaving: dict[str, ConsumerGroupMember] = {}
        left_events: list[ev.GroupEvent] = []
        for member_id, instance_id in identities:
            try:
                if instance_id is None:
                    member = _classic_member(group, member_id, None)
                else:
                    holder = group.static_member_id(instance_id)
                    member_or_none = None if holder is None else group.members.get(holder)
                    if member_or_none is None:
                        raise _Refused(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
                    # An administrative removal by instance id names no member id.
                    member = _classic_member(group, member_id or member_or_none.member_id, instance_id)
            except _Refused as error:
                responses.append(r.leave_member_response(member_id, instance_id, error.code))
                continue
            self.log.info("group %s: classic member %s left", group.group_id, member.member_id)
            left_events.append(ev.MemberLeft(group.group_id, member.member_id, instance_id, "leave_group"))
            leaving[member.member_id] = member
            responses.append(r.leave_member_response(member.member_id, instance_id))
        if leaving:
            self.manager._events.clear()
            out.records.extend(self._remove_members(group, list(leaving.values())))
            out.events.extend(left_events)
            out.events.extend(self.manager._events)
        out.reply(ctx, r.leave_response(version, ErrorCode.NONE, responses))

    def _remove_members(self, group: ConsumerGroup, members: list[ConsumerGroupMember]) -> list[Record]:
        """Kafka's ``classicGroupLeaveToConsumerGroup``: the group turned back into a classic one when
        only classic members would remain, else each member's tombstones and one epoch bump."""
        group_id = group.group_id
        for member in members:
            self._cancel_classic_timers(group_id, member.member_id)
        downgraded = self.manager.downgrade(group, [mm.member_id for mm in members])
        if downgraded is not None:
            for member in members:
                self.manager._cancel_timers(group_id, member.member_id)
            return downgraded
        records: list[Record] = []
        for member in members[:-1]:
            records.extend(rec.consumer_group_member_tombstones(group_id, member.member_id))
            self.manager._cancel_timers(group_id, member.member_id)
        records.extend(self.manager.fence_member_records(group, members[-1], "member_left"))
        return records

    # -- timers ----------------------------------------------------------------------------------------
    def _schedule_fence(
        self,
        key: tuple[str, str, str],
        group_id: str,
        member_id: str,
        timeout_ms: int,
        *,
        replace_existing: bool = True,
    ) -> None:
        timers = self.manager.timers
        if not replace_existing and timers.is_scheduled(key):
            return
        timers.schedule(
            key,
            self.manager.now_ms() + max(timeout_ms, 0),
            lambda out: self._on_fence_timeout(group_id, member_id, timeout_ms, key[0], out),
        )

    def _cancel_classic_timers(self, group_id: str, member_id: str) -> None:
        self.manager.timers.cancel(sync_timeout_key(group_id, member_id))
        self.manager.timers.cancel(join_timeout_key(group_id, member_id))

    def _on_fence_timeout(
        self, group_id: str, member_id: str, timeout_ms: int, what: str, out: Result
    ) -> None:
        group = self.manager.groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if group is None or member is None or not member.uses_classic_protocol:
            return
        self.log.info(
            "group %s: classic member %s fenced (%s timed out after %d ms)",
            group_id,
            member_id,
            what,
            timeout_ms,
        )
        self.manager._events.clear()
        out.emit(ev.MemberExpired(group_id, member_id, member.instance_id, timeout_ms))
        self._cancel_classic_timers(group_id, member_id)
        out.records.extend(self.manager.fence_member_records(group, member, "member_expired"))
        out.events.extend(self.manager._events)
