"""Admin APIs over a shard's classic groups: DescribeGroups, ListGroups, DeleteGroups.

Read-only except DeleteGroups, which only returns tombstones (offsets first, then the group);
the groups disappear when those are replayed. As in Kafka, DescribeGroups and DeleteGroups accept
the empty group id (only a null one is invalid), for backwards compatibility.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kcoord.coordinator.core.events import GroupDeleted
from kcoord.coordinator.core.records import group_tombstone
from kcoord.coordinator.core.result import RequestContext, Result
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

from .group import ClassicGroup, ClassicGroupState
from .manager import ClassicGroupManager

S = ClassicGroupState
GROUP_TYPE = "classic"


def describe_groups(
    manager: ClassicGroupManager, ctx: RequestContext, req: m.DescribeGroupsRequest, out: Result
) -> None:
    R = m.DescribeGroupsResponse
    described = []
    for group_id in req.groups:
        group = manager.groups.get(group_id)
        if group_id is None:
            described.append(R.DescribedGroup(group_id="", error_code=int(ErrorCode.INVALID_GROUP_ID)))
        elif group is None:
            if ctx.api_version >= 6:
                described.append(
                    R.DescribedGroup(
                        group_id=group_id,
                        group_state=S.DEAD.value,
                        error_code=int(ErrorCode.GROUP_ID_NOT_FOUND),
                        error_message=f"Group {group_id} not found.",
                    )
                )
            else:
                described.append(R.DescribedGroup(group_id=group_id, group_state=S.DEAD.value))
        else:
            described.append(_describe(group))
    out.reply(ctx, R(groups=described))


def _describe(group: ClassicGroup) -> Any:
    """Members' subscriptions are only shown for a Stable group (the protocol is settled then);
    their assignments always."""
    R = m.DescribeGroupsResponse
    stable = group.is_in(S.STABLE)
    members = [
        R.DescribedGroupMember(
            member_id=member.member_id,
            group_instance_id=member.group_instance_id,
            client_id=member.client_id,
            client_host=member.client_host,
            member_metadata=member.metadata(group.protocol_name) if stable else b"",
            member_assignment=member.assignment,
        )
        for member in group.members.values()
    ]
    return R.DescribedGroup(
        error_code=0,
        group_id=group.group_id,
        group_state=group.state_name,
        protocol_type=group.protocol_type or "",
        protocol_data=(group.protocol_name or "") if stable else "",
        members=members,
    )


def list_groups(
    manager: ClassicGroupManager, ctx: RequestContext, req: m.ListGroupsRequest, out: Result
) -> None:
    states = {s.lower() for s in req.states_filter} if ctx.api_version >= 4 else set()
    types = {t.lower() for t in req.types_filter} if ctx.api_version >= 5 else set()
    R = m.ListGroupsResponse
    listed = [
        R.ListedGroup(
            group_id=group.group_id,
            protocol_type=group.protocol_type or "",
            group_state=group.state_name,
            group_type=GROUP_TYPE,
        )
        for group in manager.groups.values()
        if (not states or group.state_name.lower() in states) and (not types or GROUP_TYPE in types)
    ]
    out.reply(ctx, R(error_code=0, groups=listed))


def delete_groups(
    manager: ClassicGroupManager,
    delete_offsets: Callable[[str, Result], None],
    ctx: RequestContext,
    req: m.DeleteGroupsRequest,
    out: Result,
) -> None:
    R = m.DeleteGroupsResponse
    results = []
    for group_id in req.groups_names:
        error = _validate_delete(manager, group_id)
        if error is None:
            delete_offsets(group_id, out)
            out.records.append(group_tombstone(group_id))
            out.emit(GroupDeleted(group_id, "delete_groups"))
            manager.log.info("group %s: deleted by DeleteGroups", group_id)
        results.append(
            R.DeletableGroupResult(group_id=group_id or "", error_code=int(error or ErrorCode.NONE))
        )
    out.reply(ctx, R(results=results))


def _validate_delete(manager: ClassicGroupManager, group_id: str | None) -> int | None:
    if group_id is None:
        return ErrorCode.INVALID_GROUP_ID
    group = manager.groups.get(group_id)
    if group is None or group.is_in(S.DEAD):
        return ErrorCode.GROUP_ID_NOT_FOUND
    if group.is_in(S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE):
        return ErrorCode.NON_EMPTY_GROUP
    return None
