"""The classic group membership protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) and its timers.

Behaviour follows Kafka 4.x's ``GroupMetadataManager`` (classic-group parts). Every handler takes
the :class:`~kcoord.coordinator.core.result.Result` being built and appends to it: records to write, and
replies — possibly for requests parked earlier (a completed join phase answers every parked
JoinGroup; the leader's SyncGroup answers every parked follower SyncGroup).

Invariants:
- A group's durable state (what its GroupMetadata record holds) changes only in the replay of
  that record (:meth:`.store.ClassicGroups.replay`), which the runtime calls right after a handler
  returns, exactly as when a shard loads. Handlers compute the next value and write it:
  completing a sync, emptying a group and replacing a static member in a Stable group are the
  record's replay, not the handler's doing. Soft state (who joined this round, parked requests,
  pending members, deadlines) changes here; during a rebalance the membership runs ahead of the
  log, as in Kafka (see :mod:`.group`).
- A handler that writes a group's record does not read the state that record produces: it is
  replayed only after the handler returns (so a timer that writes ends its poll, see
  ``GroupCoordinatorShard.poll``).
- Every parked request is answered exactly once (see :mod:`kcoord.coordinator.core.classic.member`).
- Timer callbacks look their group up by id and do nothing if it is gone: a timer never keeps a
  deleted group alive, and stale timers are harmless.
- Replies reveal records only after the runtime had them acknowledged, so answering in the same
  Result as the record (e.g. the static-member replacement) is "write, then answer".
- No group record larger than the log takes (``max_record_bytes``) is emitted: it could never be
  written, and a failed append would cost the whole shard a reload. A group too large for one
  record is written split (:meth:`.store.ClassicGroups.records_for`), which Kafka does not do; only
  a group that cannot be written even so (one member's metadata and assignment alone larger than
  a record) fails the request that would need it, as Kafka fails that write alone: a leader's
  SyncGroup answers every waiting member UNKNOWN_SERVER_ERROR and the group rebalances; a static
  member's replacement, or a JoinGroup that would create a group whose first record is too large,
  is answered UNKNOWN_SERVER_ERROR and changes nothing. (A record with no members is at most
  ~65 kB: group id and protocol type are int16-length strings.)
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from kcoord.coordinator.core import events as ev
from kcoord.coordinator.core import records
from kcoord.coordinator.core import responses as r
from kcoord.coordinator.core.clock import NowMs
from kcoord.coordinator.core.group_config import GroupConfig
from kcoord.coordinator.core.result import RequestContext, Result
from kcoord.coordinator.core.timer import TimerQueue
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.record_batch import DEFAULT_MAX_RECORD_BYTES
from kcoord.protocol.records import GroupMetadataPartKey, Record, group_metadata_record_size

from .group import ClassicGroup, ClassicGroupState
from .member import ClassicMember, Protocols
from .store import ClassicGroups

S = ClassicGroupState


HEARTBEAT_KEY = "classic-heartbeat"


def heartbeat_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return (HEARTBEAT_KEY, group_id, member_id)


def join_key(group_id: str) -> tuple[str, str]:
    return ("classic-join", group_id)


def sync_key(group_id: str) -> tuple[str, str]:
    return ("classic-sync", group_id)


# The bounded reason a rebalance is counted under (events.REBALANCE_REASONS), by the free-text
# reason _update_member_then_rebalance_or_complete_join gets.
_UPDATE_KINDS = {
    "member rejoins": "member_joined",
    "metadata changed": "metadata_changed",
    "leader rejoins": "leader_rejoined",
}


def _protocols(request: m.JoinGroupRequest) -> Protocols:
    """The request's protocols in preference order; a repeated name keeps its first entry."""
    seen: set[str] = set()
    out: Protocols = []
    for p in request.protocols:
        if p.name not in seen:
            seen.add(p.name)
            out.append((p.name, p.metadata))
    return out


class ClassicGroupManager:
    def __init__(
        self,
        config: GroupConfig,
        now_ms: NowMs,
        timers: TimerQueue,
        groups: ClassicGroups,
        log: logging.Logger,
        new_member_id: Callable[[str], str] | None = None,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    ) -> None:
        self.config = config
        self.now_ms = now_ms
        self.timers = timers
        self.groups = groups
        groups.on_removed = self._cancel_timers
        self.log = log
        self.max_record_bytes = max_record_bytes
        self._new_member_id = new_member_id or (lambda prefix: f"{prefix}-{uuid.uuid4()}")
        self.rebalances_prepared = 0
        self.rebalances_completed = 0

    # ===============================================================================================
    # JoinGroup
    # ===============================================================================================
    def join(self, ctx: RequestContext, req: m.JoinGroupRequest, out: Result) -> None:
        version = ctx.api_version
        if not req.group_id:
            out.reply(ctx, r.join_response(version, ErrorCode.INVALID_GROUP_ID, member_id=req.member_id))
            return
        if (
            not self.config.min_session_timeout_ms
            <= req.session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            out.reply(
                ctx, r.join_response(version, ErrorCode.INVALID_SESSION_TIMEOUT, member_id=req.member_id)
            )
            return
        if req.reason:
            self.log.info(
                "group %s: member %r joins; client reason: %s", req.group_id, req.member_id, req.reason
            )

        group = self.groups.get(req.group_id)
        is_new_group = group is None
        unknown_member = req.member_id == ""
        if group is None:
            if not unknown_member:
                out.reply(ctx, r.join_response(version, ErrorCode.UNKNOWN_MEMBER_ID, member_id=req.member_id))
                return
            group = ClassicGroup(req.group_id, self.now_ms())
            if self._writable(group, records.group_metadata_record(
                req.group_id, protocol_type=req.protocol_type, generation=0, protocol=None, leader=None,
                current_state_timestamp=group.current_state_timestamp, members=[],
            ), "creating the group") is None:  # fmt: skip
                # Kafka reverts a group whose first record fails and answers the join with the mapped
                # error; kcoord does not create it. (Only a group id or protocol type of nearly the
                # whole limit can do this.)
                out.reply(
                    ctx, r.join_response(version, ErrorCode.UNKNOWN_SERVER_ERROR, member_id=req.member_id)
                )
                return
            self.groups.add(group)

        records_before = len(out.records)
        if not self._accept_joining_member(group, req.member_id):
            if group.has_member(req.member_id):
                self._remove_member(group, req.member_id, out)
            elif group.is_pending_member(req.member_id):
                group.pending_join_members.discard(req.member_id)
                self.timers.cancel(heartbeat_key(group.group_id, req.member_id))
            out.reply(ctx, r.join_response(version, ErrorCode.GROUP_MAX_SIZE_REACHED, member_id=""))
        elif unknown_member:
            self._join_new_member(ctx, req, group, out)
        else:
            self._join_existing_member(ctx, req, group, out)

        if is_new_group and len(out.records) == records_before:
            # Kafka commits a newly created group with an empty snapshot.
            out.records.extend(
                self._writable(group, records.empty_group_record(group), "creating the group") or []
            )

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        max_size = self.config.max_size
        if group.is_in(S.EMPTY, S.DEAD):
            return True
        if group.is_in(S.PREPARING_REBALANCE):
            # Counting members awaiting join (not all members) lets the last rejoiners be turned
            # away when the group is over a (lowered) max size.
            already_waiting = group.has_member(member_id) and group.member(member_id).is_awaiting_join
            return already_waiting or group.num_awaiting_join() < max_size
        return group.has_member(member_id) or group.num_members < max_size

    def _join_new_member(
        self, ctx: RequestContext, req: m.JoinGroupRequest, group: ClassicGroup, out: Result
    ) -> None:
        version = ctx.api_version
        protocols = _protocols(req)
        if group.is_in(S.DEAD):
            out.reply(ctx, r.join_response(version, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(req.protocol_type, {name for name, _ in protocols}):
            out.reply(ctx, r.join_response(version, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        instance_id = req.group_instance_id
        new_member_id = self._new_member_id(instance_id if instance_id is not None else ctx.client_id)
        if instance_id is not None:
            existing = group.static_member_id(instance_id)
            if existing is not None:
                self.log.info(
                    "group %s: static member %s rejoins with an unknown member id in state %s; replacing %s with %s",
                    group.group_id, instance_id, group.state_name, existing, new_member_id,
                )  # fmt: skip
                self._replace_static_member(ctx, req, group, existing, new_member_id, out)
            else:
                self._add_member_then_rebalance_or_complete_join(ctx, req, group, new_member_id, out)
        elif version >= 4:
            # KIP-394: hand out the id first; the member exists once it joins again with it.
            group.pending_join_members.add(new_member_id)
            self._schedule_heartbeat(group.group_id, new_member_id, req.session_timeout_ms)
            out.reply(ctx, r.join_response(version, ErrorCode.MEMBER_ID_REQUIRED, member_id=new_member_id))
        else:
            self._add_member_then_rebalance_or_complete_join(ctx, req, group, new_member_id, out)

    def _join_existing_member(
        self, ctx: RequestContext, req: m.JoinGroupRequest, group: ClassicGroup, out: Result
    ) -> None:
        version = ctx.api_version
        member_id = req.member_id
        protocols = _protocols(req)
        if group.is_in(S.DEAD):
            out.reply(ctx, r.join_response(version, ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=member_id))
            return
        if not group.supports_protocols(req.protocol_type, {name for name, _ in protocols}):
            out.reply(
                ctx, r.join_response(version, ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
            )
            return
        if group.is_pending_member(member_id):
            if req.group_instance_id is not None:
                # Pending members are dynamic by construction; Kafka fails this with an
                # IllegalStateException, which clients see as UNKNOWN_SERVER_ERROR.
                out.reply(ctx, r.join_response(version, ErrorCode.UNKNOWN_SERVER_ERROR, member_id=member_id))
                return
            self._add_member_then_rebalance_or_complete_join(ctx, req, group, member_id, out)
            return
        error = self.validate_member(group, member_id, req.group_instance_id, "join-group")
        if error is not None:
            ev.emit_fenced(out, group.group_id, member_id, req.group_instance_id, error, "join_group")
            out.reply(ctx, r.join_response(version, error, member_id=member_id))
            return
        member = group.member(member_id)
        if group.is_in(S.PREPARING_REBALANCE):
            self._update_member_then_rebalance_or_complete_join(
                ctx, req, group, member, "member rejoins", out
            )
        elif group.is_in(S.COMPLETING_REBALANCE):
            if member.matches(protocols):
                # The member probably lost its JoinGroup response: repeat it.
                members = group.join_response_members() if group.is_leader(member_id) else []
                out.reply(ctx, self._current_generation_join_response(version, group, member_id, members))
            else:
                self._update_member_then_rebalance_or_complete_join(
                    ctx, req, group, member, "metadata changed", out
                )
        elif group.is_in(S.STABLE):
            if group.is_leader(member_id):
                # A leader's JoinGroup always rebalances: it may have seen a metadata change.
                self._update_member_then_rebalance_or_complete_join(
                    ctx, req, group, member, "leader rejoins", out
                )
            elif not member.matches(protocols):
                self._update_member_then_rebalance_or_complete_join(
                    ctx, req, group, member, "metadata changed", out
                )
            else:
                out.reply(ctx, self._current_generation_join_response(version, group, member_id, []))
        else:
            self.log.warning(
                "group %s: member %s rejoins an %s group", group.group_id, member_id, group.state_name
            )
            out.reply(ctx, r.join_response(version, ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id))

    def _current_generation_join_response(
        self,
        version: int,
        group: ClassicGroup,
        member_id: str,
        members: list[m.JoinGroupResponse.JoinGroupResponseMember],
        *,
        leader: str | None = None,
        skip_assignment: bool = False,
    ) -> m.JoinGroupResponse:
        return r.join_response(
            version,
            member_id=member_id,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id if leader is None else leader,
            members=members,
            skip_assignment=skip_assignment,
        )

    def _rebalance_timeout(self, ctx: RequestContext, req: m.JoinGroupRequest) -> int:
        # JoinGroup v0 has no rebalance timeout: Kafka uses the session timeout.
        return req.session_timeout_ms if ctx.api_version == 0 else req.rebalance_timeout_ms

    def _add_member_then_rebalance_or_complete_join(
        self, ctx: RequestContext, req: m.JoinGroupRequest, group: ClassicGroup, member_id: str, out: Result
    ) -> None:
        member = ClassicMember(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=ctx.client_id,
            client_host=ctx.client_host,
            rebalance_timeout_ms=self._rebalance_timeout(ctx, req),
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=_protocols(req),
            is_new=True,
        )
        if group.is_in(S.PREPARING_REBALANCE) and group.previous_state is S.EMPTY:
            group.new_member_added = True  # extends the initial rebalance delay
        group.add(member)
        out.emit(
            ev.MemberJoined(
                group.group_id,
                member_id,
                member.group_instance_id,
                member.client_id,
                member.client_host,
                member.protocol_type,
            )
        )
        member.awaiting_join = ctx
        # A parked JoinGroup cannot heartbeat, so new members get the (long) new-member join
        # timeout; a client that gave up and retries must not leave a defunct member forever.
        self._schedule_heartbeat(group.group_id, member_id, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(
            group,
            f"adding new member {member_id} with group instance id {req.group_instance_id}",
            out,
            kind="member_joined",
        )

    def _update_member_then_rebalance_or_complete_join(
        self,
        ctx: RequestContext,
        req: m.JoinGroupRequest,
        group: ClassicGroup,
        member: ClassicMember,
        reason: str,
        out: Result,
    ) -> None:
        group.update_member(
            member, _protocols(req), self._rebalance_timeout(ctx, req), req.session_timeout_ms
        )
        self._park_join(member, ctx, out)
        self._maybe_prepare_rebalance_or_complete_join(
            group, f"{reason}: {member.member_id}", out, kind=_UPDATE_KINDS.get(reason, "other")
        )

    def _replace_static_member(
        self,
        ctx: RequestContext,
        req: m.JoinGroupRequest,
        group: ClassicGroup,
        old_member_id: str,
        new_member_id: str,
        out: Result,
    ) -> None:
        """A known instance id joins with an empty member id: it gets a new id and the old one is
        fenced. In a Stable group whose protocol would not change, persist and answer with the
        current generation (no rebalance); otherwise rebalance."""
        instance_id = req.group_instance_id
        assert instance_id is not None  # only a static member has an older self to replace
        protocols = _protocols(req)
        old = group.member(old_member_id)
        self._answer_parked(
            old,
            out,
            join=lambda v: r.join_response(v, ErrorCode.FENCED_INSTANCE_ID, member_id=old_member_id),
            sync=r.sync_response(ErrorCode.FENCED_INSTANCE_ID),
        )
        self.timers.cancel(heartbeat_key(group.group_id, old_member_id))
        if group.is_in(S.STABLE) and group.protocol_name == group.select_protocol_replacing(
            old_member_id, protocols
        ):
            self._replace_static_member_in_stable_group(ctx, req, group, old, new_member_id, protocols, out)
            return
        # The replacement starts a rebalance: the membership runs ahead of the log until it settles.
        member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        self._schedule_heartbeat(group.group_id, new_member_id, member.session_timeout_ms)
        group.update_member(member, protocols, self._rebalance_timeout(ctx, req), req.session_timeout_ms)
        member.client_id = ctx.client_id
        member.client_host = ctx.client_host
        out.emit(
            ev.MemberJoined(
                group.group_id,
                new_member_id,
                instance_id,
                member.client_id,
                member.client_host,
                member.protocol_type,
                rejoin=True,
            )
        )
        member.awaiting_join = ctx

        if group.is_in(S.STABLE):
            self._maybe_prepare_rebalance_or_complete_join(
                group,
                f"static member {instance_id} rejoined with a protocol change",
                out,
                kind="static_member_replaced",
            )
            return
        if group.is_in(S.COMPLETING_REBALANCE):
            # The leader may already be assigning to the old id: rebalance so the new id gets one.
            self._prepare_rebalance(
                group,
                f"static member {instance_id} rejoined during CompletingRebalance",
                out,
                kind="static_member_replaced",
            )
            return
        self._maybe_complete_join_phase(group, out)

    def _replace_static_member_in_stable_group(
        self,
        ctx: RequestContext,
        req: m.JoinGroupRequest,
        group: ClassicGroup,
        old: ClassicMember,
        new_member_id: str,
        protocols: Protocols,
        out: Result,
    ) -> None:
        """The protocol would not change: persist the group with the new member id in place of the
        old one (the record's replay makes the swap) and answer with the current generation."""
        version = ctx.api_version
        instance_id = req.group_instance_id
        assert instance_id is not None  # only a static member has an older self to replace
        newcomer = ClassicMember(
            member_id=new_member_id,
            group_instance_id=old.group_instance_id,
            client_id=ctx.client_id,
            client_host=ctx.client_host,
            rebalance_timeout_ms=self._rebalance_timeout(ctx, req),
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=old.protocol_type,
            protocols=protocols,
            assignment=old.assignment,
        )
        # The replacement joins last, as Kafka's replaceStaticMember re-inserts it.
        members = [member for mid, member in group.members.items() if mid != old.member_id] + [newcomer]
        leader = new_member_id if group.is_leader(old.member_id) else group.leader_id
        written = self._writable(group, records.group_metadata_record(
            group.group_id,
            protocol_type=group.protocol_type,
            generation=group.generation_id,
            protocol=group.protocol_name,
            leader=leader,
            current_state_timestamp=group.current_state_timestamp,
            members=[records.member_metadata(mb, group.protocol_name, mb.assignment) for mb in members],
        ), f"static member {instance_id} rejoining as {new_member_id}")  # fmt: skip
        if written is None:
            # Kafka reverts to the old member id when this write fails (its session goes on) and
            # answers the join with the mapped error (MESSAGE_TOO_LARGE -> UNKNOWN_SERVER_ERROR).
            self._schedule_heartbeat(group.group_id, old.member_id, old.session_timeout_ms)
            out.reply(ctx, r.join_response(
                version, ErrorCode.UNKNOWN_SERVER_ERROR, member_id="", generation_id=group.generation_id,
                protocol_type=group.protocol_type, protocol_name=group.protocol_name, leader=group.leader_id,
            ))  # fmt: skip
            return
        # Timers are soft state: the new id's session starts with the old member's timeout, as the
        # member it replaces had it.
        self._schedule_heartbeat(group.group_id, new_member_id, old.session_timeout_ms)
        out.emit(
            ev.MemberJoined(
                group.group_id,
                new_member_id,
                instance_id,
                ctx.client_id,
                ctx.client_host,
                old.protocol_type,
                rejoin=True,
            )
        )
        self.log.info(
            "group %s: static member %s rejoined as %s without changing the protocol; no rebalance",
            group.group_id, instance_id, new_member_id,
        )  # fmt: skip
        group.pending_sync_members.discard(old.member_id)
        group.joining_protocols[new_member_id] = protocols
        out.records.extend(written)
        if version >= 9:
            # KIP-814: a static leader learns it is the leader but must not reassign.
            is_leader = leader == new_member_id
            joined = group.join_response_members(members) if is_leader else []
            response = self._current_generation_join_response(
                version, group, new_member_id, joined, leader=leader, skip_assignment=is_leader
            )
        else:
            # Older clients would reassign if told they lead: name the old leader id.
            response = self._current_generation_join_response(
                version, group, new_member_id, [], leader=group.leader_id or ""
            )
        out.reply(ctx, response)

    # ===============================================================================================
    # Rebalance machinery
    # ===============================================================================================
    def _maybe_prepare_rebalance_or_complete_join(
        self, group: ClassicGroup, reason: str, out: Result, kind: str = "other"
    ) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason, out, kind)
        else:
            self._maybe_complete_join_phase(group, out)

    def _maybe_complete_join_phase(self, group: ClassicGroup, out: Result) -> None:
        if not group.is_in(S.PREPARING_REBALANCE):
            return
        if group.previous_state is S.EMPTY:
            return  # the initial rebalance waits for its delay timer
        if not group.has_all_members_joined():
            return
        self._complete_join(group, out)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str, out: Result, kind: str = "other") -> None:
        """``kind`` is the bounded reason (events.REBALANCE_REASONS); ``reason`` is free text for logs."""
        if group.is_in(S.EMPTY, S.STABLE) or group.rebalance_started_ms is None:
            group.rebalance_started_ms = self.now_ms()  # a new episode; CompletingRebalance continues one
        old_state = group.state_name
        if group.is_in(S.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment(group, ErrorCode.REBALANCE_IN_PROGRESS, out)
        self._remove_sync_expiration(group)
        initial = group.is_empty
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule_initial_rebalance(group.group_id, delay, remaining)
        group.transition_to(S.PREPARING_REBALANCE, self.now_ms())
        self.rebalances_prepared += 1
        out.emit(ev.GroupStateChanged(group.group_id, old_state, group.state_name, group.generation_id))
        out.emit(ev.RebalanceStarted(group.group_id, kind, group.generation_id, group.num_members, reason))
        self.log.info(
            "group %s: preparing to rebalance, old generation %d (reason: %s)",
            group.group_id, group.generation_id, reason,
        )  # fmt: skip
        if not initial:
            if group.has_all_members_joined():
                self._complete_join(group, out)
            else:
                self._schedule_join_timeout(group)

    def _schedule_join_timeout(self, group: ClassicGroup) -> None:
        group_id = group.group_id
        self.timers.schedule(
            join_key(group_id),
            self.now_ms() + group.rebalance_timeout_ms(),
            lambda out: self._on_join_timeout(group_id, out),
        )

    def _schedule_initial_rebalance(self, group_id: str, delay_ms: int, remaining_ms: int) -> None:
        self.timers.schedule(
            join_key(group_id),
            self.now_ms() + delay_ms,
            lambda out: self._on_initial_rebalance_delay(group_id, delay_ms, remaining_ms, out),
        )

    def _on_initial_rebalance_delay(
        self, group_id: str, delay_ms: int, remaining_ms: int, out: Result
    ) -> None:
        group = self.groups.get(group_id)
        if group is None:
            return
        if group.new_member_added and remaining_ms != 0:
            # Members are still arriving: wait another delay, within the rebalance timeout.
            group.new_member_added = False
            self._schedule_initial_rebalance(
                group_id,
                min(self.config.initial_rebalance_delay_ms, remaining_ms),
                max(remaining_ms - delay_ms, 0),
            )
        else:
            self._complete_join(group, out)

    def _on_join_timeout(self, group_id: str, out: Result) -> None:
        group = self.groups.get(group_id)
        if group is not None:
            self._complete_join(group, out)

    def _complete_join(self, group: ClassicGroup, out: Result) -> None:
        """End the join phase: drop dynamic members that did not rejoin (static ones stay), then
        start the next generation — Empty (persisted) or CompletingRebalance (answer the joins)."""
        self.timers.cancel(join_key(group.group_id))
        if not group.is_in(S.PREPARING_REBALANCE):
            self.log.debug("group %s: not completing join in state %s", group.group_id, group.state_name)
            return
        gone = [member.member_id for member in group.not_yet_rejoined() if not member.is_static]
        for member_id in gone:
            out.emit(ev.MemberLeft(group.group_id, member_id, None, "not_rejoined"))
            self._remove_member(group, member_id, out)
        if gone:
            self.log.info("group %s: removed dynamic members that did not rejoin: %s", group.group_id, gone)

        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined, but static members remain: wait for them or their session expiry.
            self.log.error("group %s: cannot complete the rebalance, no member rejoined", group.group_id)
            self._schedule_join_timeout(group)
            return

        if not group.members:
            self._complete_join_empty(group, out)
            return
        group.init_next_generation(self.now_ms())
        out.emit(
            ev.GroupStateChanged(
                group.group_id, S.PREPARING_REBALANCE.value, group.state_name, group.generation_id
            )
        )
        self.log.info(
            "group %s: generation %d with %d members, protocol %s",
            group.group_id, group.generation_id, group.num_members, group.protocol_name,
        )  # fmt: skip
        leader_members = group.join_response_members()
        for member in group.members.values():
            if member.awaiting_join is not None:
                ctx = member.awaiting_join
                member.awaiting_join = None
                members = leader_members if group.is_leader(member.member_id) else []
                out.reply(
                    ctx,
                    self._current_generation_join_response(ctx.api_version, group, member.member_id, members),
                )
            self._schedule_heartbeat(group.group_id, member.member_id, member.session_timeout_ms)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self._schedule_pending_sync(group)

    def _complete_join_empty(self, group: ClassicGroup, out: Result) -> None:
        """Nobody is left: the next generation is Empty. Its record's replay empties the group."""
        generation = group.generation_id + 1
        group.pending_sync_members.clear()
        out.emit(ev.GroupStateChanged(group.group_id, S.PREPARING_REBALANCE.value, S.EMPTY.value, generation))
        self.log.info("group %s: generation %d is empty", group.group_id, generation)
        self._rebalance_done(group, out, generation=generation, protocol_name=None)
        empty = records.group_metadata_record(
            group.group_id,
            protocol_type=group.protocol_type,
            generation=generation,
            protocol=None,
            leader=None,
            current_state_timestamp=self.now_ms(),
            members=[],
        )
        # With no members the record fits unless the group id alone nearly fills it, which the
        # group's first record already refused; its parts (if it was split) are tombstoned.
        out.records.extend(self.groups.records_for(empty, self.max_record_bytes) or [empty])

    def _schedule_pending_sync(self, group: ClassicGroup) -> None:
        group_id, generation = group.group_id, group.generation_id
        self.timers.schedule(
            sync_key(group_id),
            self.now_ms() + group.rebalance_timeout_ms(),
            lambda out: self._on_pending_sync_expired(group_id, generation, out),
        )

    def _remove_sync_expiration(self, group: ClassicGroup) -> None:
        group.pending_sync_members.clear()
        self.timers.cancel(sync_key(group.group_id))

    def _on_pending_sync_expired(self, group_id: str, generation: int, out: Result) -> None:
        group = self.groups.get(group_id)
        if group is None or group.generation_id != generation:
            return
        if group.is_in(S.COMPLETING_REBALANCE, S.STABLE) and group.pending_sync_members:
            missing = sorted(group.pending_sync_members)
            for member_id in missing:
                member = group.members.get(member_id)
                instance_id = member.group_instance_id if member is not None else None
                out.emit(ev.MemberLeft(group.group_id, member_id, instance_id, "sync_timeout"))
                self._remove_member(group, member_id, out)
            self._prepare_rebalance(
                group, f"members {missing} did not send SyncGroup in time", out, kind="sync_timeout"
            )

    def _reset_and_propagate_assignment(self, group: ClassicGroup, error: int, out: Result) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error, out)

    def _propagate_assignment(
        self, group: ClassicGroup, error: int, out: Result, assignment: dict[str, bytes] | None = None
    ) -> None:
        """Answer every parked SyncGroup: with ``assignment`` (the one being written) when given,
        else with the members' current assignments."""
        ok = error == ErrorCode.NONE
        for member in group.members.values():
            if member.awaiting_sync is None:
                continue
            ctx = member.awaiting_sync
            member.awaiting_sync = None
            out.reply(
                ctx,
                r.sync_response(
                    error,
                    protocol_type=group.protocol_type if ok else None,
                    protocol_name=group.protocol_name if ok else None,
                    assignment=member.assignment
                    if assignment is None
                    else assignment.get(member.member_id, b""),
                ),
            )
            # A session that ran out while the member waited is reset now that it has its answer.
            self._schedule_heartbeat(group.group_id, member.member_id, member.session_timeout_ms)

    # ===============================================================================================
    # SyncGroup
    # ===============================================================================================
    def sync(self, ctx: RequestContext, req: m.SyncGroupRequest, out: Result) -> None:
        if not req.group_id:
            out.reply(ctx, r.sync_response(ErrorCode.INVALID_GROUP_ID))
            return
        group = self.groups.get(req.group_id)
        if group is None or group.is_empty:
            out.reply(ctx, r.sync_response(ErrorCode.UNKNOWN_MEMBER_ID))
            return
        error = self._validate_sync(group, req)
        if error is not None:
            ev.emit_fenced(out, group.group_id, req.member_id, req.group_instance_id, error, "sync_group")
            out.reply(ctx, r.sync_response(error))
            return
        if group.is_in(S.PREPARING_REBALANCE):
            out.reply(ctx, r.sync_response(ErrorCode.REBALANCE_IN_PROGRESS))
            return
        member = group.member(req.member_id)
        if group.is_in(S.COMPLETING_REBALANCE):
            self._park_sync(member, ctx, out)
            self._remove_pending_sync_member(group, member.member_id)
            if group.is_leader(member.member_id):
                self._complete_sync(group, req, out)
            return
        # Stable: hand back the assignment of the current generation.
        self._remove_pending_sync_member(group, member.member_id)
        out.reply(
            ctx,
            r.sync_response(
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                assignment=member.assignment,
            ),
        )

    def _complete_sync(self, group: ClassicGroup, req: m.SyncGroupRequest, out: Result) -> None:
        """The leader's assignment arrived: persist the generation, answer every waiting member."""
        assignment = {a.member_id: a.assignment for a in req.assignments}
        missing = [member_id for member_id in group.members if member_id not in assignment]
        if missing:
            self.log.warning(
                "group %s: empty assignments for %d members (first: %s) in generation %d",
                group.group_id, len(missing), missing[:3], group.generation_id,
            )  # fmt: skip
        self.log.info(
            "group %s: assignment received from leader %s for generation %d (%d members, %d static)",
            group.group_id, req.member_id, group.generation_id, group.num_members, group.num_static_members,
        )  # fmt: skip
        written = self._writable(
            group, records.classic_group_record(group, assignment), "the leader's assignment"
        )
        if written is None:
            # Kafka's failed append: appendGroupMetadataErrorToResponseError(MESSAGE_TOO_LARGE) is
            # UNKNOWN_SERVER_ERROR for every waiting member, and the group rebalances.
            self._reset_and_propagate_assignment(group, ErrorCode.UNKNOWN_SERVER_ERROR, out)
            self._maybe_prepare_rebalance_or_complete_join(
                group, f"error UNKNOWN_SERVER_ERROR when storing group assignment during SyncGroup "
                f"(member: {req.member_id})", out, kind="record_too_large",
            )  # fmt: skip
            return
        # The record's replay stores the assignments and makes the group Stable.
        out.records.extend(written)
        out.emit(
            ev.AssignmentComputed(
                group.group_id,
                group.generation_id,
                group.protocol_type,
                group.protocol_name,
                tuple(
                    ev.MemberAssignment(m.member_id, m.group_instance_id, assignment.get(m.member_id, b""))
                    for m in group.members.values()
                ),
            )
        )
        self._propagate_assignment(group, ErrorCode.NONE, out, assignment)
        self.rebalances_completed += 1
        out.emit(
            ev.GroupStateChanged(
                group.group_id, S.COMPLETING_REBALANCE.value, S.STABLE.value, group.generation_id
            )
        )
        self._rebalance_done(group, out, generation=group.generation_id, protocol_name=group.protocol_name)

    def _rebalance_done(
        self, group: ClassicGroup, out: Result, *, generation: int, protocol_name: str | None
    ) -> None:
        """The episode that started in PreparingRebalance ends in Stable or Empty (the generation
        and protocol the record being written settles it with)."""
        started, group.rebalance_started_ms = group.rebalance_started_ms, None
        duration = max(0, self.now_ms() - started) if started is not None else 0
        out.emit(
            ev.RebalanceCompleted(group.group_id, generation, duration, group.num_members, protocol_name)
        )

    def _writable(self, group: ClassicGroup, record: Record, what: str) -> list[Record] | None:
        """The records that write ``record`` (split when it is larger than the log takes, see
        :meth:`.store.ClassicGroups.records_for`), or None when it cannot be written at all. Such a
        write could never succeed (Kafka's runtime refuses an oversized record with
        RecordTooLargeException before appending anything); the caller refuses its request alone.
        Only group records are checked: their size grows with members, subscriptions and assignments."""
        written = self.groups.records_for(record, self.max_record_bytes)
        size = group_metadata_record_size(record)
        if written is not None:
            if size > self.max_record_bytes:
                parts = sum(isinstance(r.key, GroupMetadataPartKey) and r.value is not None for r in written)
                self.log.info(
                    "group %s: %s makes a %d-byte group record with %d members, over the %d bytes the log "
                    "takes: written as %d part records and the group's record", group.group_id, what, size,
                    group.num_members, self.max_record_bytes, parts,
                )  # fmt: skip
            return written
        self.log.warning(
            "group %s: %s makes a %d-byte group record with %d members; the log takes records up to %d "
            "bytes (the internal topic's max.message.bytes) and one member alone does not fit: not written",
            group.group_id, what, size, group.num_members, self.max_record_bytes,
        )  # fmt: skip
        return None

    def _validate_sync(self, group: ClassicGroup, req: m.SyncGroupRequest) -> int | None:
        if group.is_in(S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self.validate_member(group, req.member_id, req.group_instance_id, "sync-group")
        if error is not None:
            return error
        if req.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if _inconsistent(req.protocol_type, group.protocol_type) or _inconsistent(
            req.protocol_name, group.protocol_name
        ):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return None

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.is_in(S.COMPLETING_REBALANCE, S.STABLE) or not group.pending_sync_members:
            self.timers.cancel(sync_key(group.group_id))

    # ===============================================================================================
    # Heartbeat
    # ===============================================================================================
    def heartbeat(self, ctx: RequestContext, req: m.HeartbeatRequest, out: Result) -> None:
        # Kafka's classicGroupHeartbeat. Every live member sends one every few seconds, so the common
        # case (a dynamic member of a live group) makes no call per rule: validate_member's checks are
        # made here for it, and its session is pushed back without building a new timer.
        group_id = req.group_id
        if not group_id:
            out.reply(ctx, r.heartbeat_response(ErrorCode.INVALID_GROUP_ID))
            return
        group = self.groups.groups.get(group_id)
        if group is None:
            out.reply(ctx, r.heartbeat_response(ErrorCode.UNKNOWN_MEMBER_ID))
            return
        state = group.state
        if state is S.DEAD:
            out.reply(ctx, r.heartbeat_response(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        member_id = req.member_id
        member = group.members.get(member_id)
        instance_id = req.group_instance_id
        if instance_id is not None or member is None:  # static fencing, or no such member
            error = self.validate_member(group, member_id, instance_id, "heartbeat")
        else:
            error = None
        if error is None and req.generation_id != group.generation_id:
            error = ErrorCode.ILLEGAL_GENERATION
        if error is not None:
            ev.emit_fenced(out, group_id, member_id, instance_id, error, "heartbeat")
            out.reply(ctx, r.heartbeat_response(error))
            return
        if state is S.EMPTY or member is None:  # (validate_member found the member: not None here)
            out.reply(ctx, r.heartbeat_response(ErrorCode.UNKNOWN_MEMBER_ID))
            return
        self._schedule_heartbeat(group_id, member_id, member.session_timeout_ms)
        if state is S.PREPARING_REBALANCE:
            out.reply(ctx, r.heartbeat_response(ErrorCode.REBALANCE_IN_PROGRESS))
        else:
            # CompletingRebalance too: clients heartbeat between their JoinGroup and SyncGroup.
            out.reply(ctx, r.heartbeat_response(ErrorCode.NONE))

    def _schedule_heartbeat(
        self, group_id: str, member_id: str, timeout_ms: int, now_ms: int | None = None
    ) -> None:
        """``now_ms``: the time the caller already read (a commit's timestamp), else the clock's."""
        key = (HEARTBEAT_KEY, group_id, member_id)  # heartbeat_key(), without its call
        deadline = (self.now_ms() if now_ms is None else now_ms) + timeout_ms
        if not self.timers.push_back(key, deadline):  # the common case: a live session moves on
            self.timers.schedule(
                key, deadline, lambda out: self._on_heartbeat_expired(group_id, member_id, out)
            )

    def offsets_committed(self, group: ClassicGroup, member_id: str, now_ms: int) -> None:
        """A valid offset commit from a member keeps its session alive while the group is Stable or
        rebalancing, as in Kafka (a commit between JoinGroup and SyncGroup does not). ``now_ms``: the
        commit's own timestamp (one clock read per commit)."""
        member = group.members.get(member_id)
        state = group.state
        # identity, not a set (an Enum member's hash is a Python-level call) nor group.is_in (a call
        # too): this runs per commit
        if member is not None and (state is S.STABLE or state is S.PREPARING_REBALANCE):
            self._schedule_heartbeat(group.group_id, member_id, member.session_timeout_ms, now_ms)

    def _on_heartbeat_expired(self, group_id: str, member_id: str, out: Result) -> None:
        group = self.groups.get(group_id)
        if group is None or group.is_in(S.DEAD):
            return
        if group.is_pending_member(member_id):
            self.log.info("group %s: pending member %s expired", group_id, member_id)
            group.pending_join_members.discard(member_id)
            if group.is_in(S.PREPARING_REBALANCE) and group.has_all_members_joined():
                self._complete_join(group, out)
            return
        if not group.has_member(member_id):
            return
        member = group.member(member_id)
        if member.has_satisfied_heartbeat():
            return
        self.log.info("group %s: member %s session expired, removing it", group_id, member_id)
        timeout = self.config.new_member_join_timeout_ms if member.is_new else member.session_timeout_ms
        out.emit(ev.MemberExpired(group_id, member_id, member.group_instance_id, timeout))
        self._remove_member(group, member_id, out)
        self._after_member_removed(group, f"member {member_id} session expired", out, kind="member_expired")

    def _after_member_removed(
        self, group: ClassicGroup, reason: str, out: Result, kind: str = "other"
    ) -> None:
        if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(group, reason, out, kind)
        elif group.is_in(S.PREPARING_REBALANCE) and group.has_all_members_joined():
            self._complete_join(group, out)

    # ===============================================================================================
    # LeaveGroup
    # ===============================================================================================
    def leave(self, ctx: RequestContext, req: m.LeaveGroupRequest, out: Result) -> None:
        version = ctx.api_version
        if not req.group_id:
            out.reply(ctx, r.leave_response(version, ErrorCode.INVALID_GROUP_ID, []))
            return
        group = self.groups.get(req.group_id)
        if group is None:
            out.reply(ctx, r.leave_response(version, ErrorCode.UNKNOWN_MEMBER_ID, []))
            return
        if group.is_in(S.DEAD):
            out.reply(ctx, r.leave_response(version, ErrorCode.COORDINATOR_NOT_AVAILABLE, []))
            return
        identities = (
            [(req.member_id, None, None)]
            if version <= 2
            else [(i.member_id, i.group_instance_id, i.reason) for i in req.members]
        )
        responses: list[Any] = []
        left: list[str] = []
        for member_id, instance_id, reason in identities:
            reason = reason or "not provided"
            if member_id == "":
                # Admin removal by instance id (KIP-345).
                current = group.static_member_id(instance_id) if instance_id is not None else None
                if current is None:
                    responses.append(
                        r.leave_member_response(member_id, instance_id, ErrorCode.UNKNOWN_MEMBER_ID)
                    )
                    continue
                self._leave_member(group, current, reason, out, kind="removed_by_admin")
                left.append(current)
                responses.append(r.leave_member_response(member_id, instance_id))
            elif group.is_pending_member(member_id):
                group.pending_join_members.discard(member_id)
                self.timers.cancel(heartbeat_key(group.group_id, member_id))
                self.log.info(
                    "group %s: pending member %s left; reason: %s", group.group_id, member_id, reason
                )
                left.append(member_id)
                responses.append(r.leave_member_response(member_id, instance_id))
            else:
                error = self.validate_member(group, member_id, instance_id, "leave-group")
                if error is not None:
                    ev.emit_fenced(out, group.group_id, member_id, instance_id, error, "leave_group")
                    responses.append(r.leave_member_response(member_id, instance_id, error))
                    continue
                self._leave_member(group, member_id, reason, out)
                left.append(member_id)
                responses.append(r.leave_member_response(member_id, instance_id))
        if left:
            if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(
                    group, f"members {left} left the group", out, kind="member_left"
                )
            elif group.is_in(S.PREPARING_REBALANCE):
                self._maybe_complete_join_phase(group, out)
        out.reply(ctx, r.leave_response(version, ErrorCode.NONE, responses))

    def _leave_member(
        self, group: ClassicGroup, member_id: str, reason: str, out: Result, kind: str = "leave_group"
    ) -> None:
        self.log.info("group %s: member %s left; client reason: %s", group.group_id, member_id, reason)
        member = group.members.get(member_id)
        instance_id = member.group_instance_id if member is not None else None
        out.emit(ev.MemberLeft(group.group_id, member_id, instance_id, kind, reason))
        self._remove_member(group, member_id, out)

    # ===============================================================================================
    # Shared helpers
    # ===============================================================================================
    def validate_member(
        self, group: ClassicGroup, member_id: str, instance_id: str | None, operation: str
    ) -> int | None:
        """:meth:`ClassicGroup.validate_member`, logging a static member fenced by its successor."""
        error = group.validate_member(member_id, instance_id)
        if error is ErrorCode.FENCED_INSTANCE_ID:
            self.log.info(
                "group %s: %s by member %s of instance %s is fenced by member %s",
                group.group_id, operation, member_id, instance_id, group.static_member_id(instance_id or ""),
            )  # fmt: skip
        return error

    def _remove_member(self, group: ClassicGroup, member_id: str, out: Result) -> None:
        """Remove a member, answering its parked requests with UNKNOWN_MEMBER_ID so a still-live
        client rejoins."""
        member = group.members.get(member_id)
        if member is not None:
            self._answer_parked(
                member,
                out,
                join=lambda v: r.join_response(v, ErrorCode.UNKNOWN_MEMBER_ID, member_id=""),
                sync=r.sync_response(ErrorCode.UNKNOWN_MEMBER_ID),
            )
        self.timers.cancel(heartbeat_key(group.group_id, member_id))
        group.remove(member_id)

    def _answer_parked(
        self, member: ClassicMember, out: Result, join: Callable[[int], Any], sync: Any
    ) -> None:
        if member.awaiting_join is not None:
            ctx = member.awaiting_join
            member.awaiting_join = None
            out.reply(ctx, join(ctx.api_version))
        if member.awaiting_sync is not None:
            ctx = member.awaiting_sync
            member.awaiting_sync = None
            out.reply(ctx, sync)

    def _park_join(self, member: ClassicMember, ctx: RequestContext, out: Result) -> None:
        previous = member.awaiting_join
        if previous is not None and previous is not ctx:
            # Kafka silently drops the older future; our runtime needs every context answered.
            out.reply(previous, r.join_response(previous.api_version, ErrorCode.REBALANCE_IN_PROGRESS,
                                                member_id=member.member_id))  # fmt: skip
        member.awaiting_join = ctx

    def _park_sync(self, member: ClassicMember, ctx: RequestContext, out: Result) -> None:
        previous = member.awaiting_sync
        if previous is not None and previous is not ctx:
            out.reply(previous, r.sync_response(ErrorCode.REBALANCE_IN_PROGRESS))
        member.awaiting_sync = ctx

    # ===============================================================================================
    # Removal and loading
    # ===============================================================================================
    def _cancel_timers(self, group: ClassicGroup) -> None:
        """The group left the store (its tombstone was replayed, or another group type took its id)."""
        group_id = group.group_id
        for member_id in list(group.members) + list(group.pending_join_members):
            self.timers.cancel(heartbeat_key(group_id, member_id))
        self.timers.cancel(join_key(group_id))
        self.timers.cancel(sync_key(group_id))

    def rebalance_after_downgrade(
        self, group_id: str, generation: int, out: Result, *, rebalance: bool = True
    ) -> None:
        """A consumer group just became this classic group (its records are replayed): its members'
        sessions start, and (``rebalance``) a rebalance gives them the classic assignment (Kafka's
        ``convertToClassicGroup`` prepares one when a member left; not when a static member's
        replacement converted it). Nothing if the group is not that one any more."""
        group = self.groups.get(group_id)
        if group is None or not group.is_in(S.STABLE) or group.generation_id != generation:
            return
        for member in group.members.values():
            self._schedule_heartbeat(group_id, member.member_id, member.session_timeout_ms)
        if rebalance:
            self._prepare_rebalance(group, f"downgrade of group {group_id} from consumer to classic", out)

    def on_loaded(self, out: Result) -> None:
        """Give every loaded member a fresh session, so members that died while we were down expire
        and static members that come back in time rejoin without a rebalance."""
        for group in list(self.groups.groups.values()):
            self.log.info("loaded classic group %s with %d members", group.group_id, group.num_members)
            for member in group.members.values():
                self._schedule_heartbeat(group.group_id, member.member_id, member.session_timeout_ms)
            if group.num_members > self.config.max_size:
                self._prepare_rebalance(
                    group, f"loaded group is over the max size {self.config.max_size}", out
                )


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current
