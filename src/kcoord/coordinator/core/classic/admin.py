"""What the admin APIs (DescribeGroups, ListGroups, DeleteGroups) say about one classic group.

The requests themselves are served over all of a shard's groups by
:mod:`kcoord.coordinator.core.group_admin`.
"""

from __future__ import annotations

from typing import Any

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

from .group import ClassicGroup, ClassicGroupState

S = ClassicGroupState
GROUP_TYPE = "classic"


def describe_group(group: ClassicGroup) -> Any:
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


def listed_group(group: ClassicGroup) -> Any:
    return m.ListGroupsResponse.ListedGroup(
        group_id=group.group_id,
        protocol_type=group.protocol_type or "",
        group_state=group.state_name,
        group_type=GROUP_TYPE,
    )


def validate_delete(group: ClassicGroup | None) -> ErrorCode:
    """Kafka's ``ClassicGroup.validateDeleteGroup``: a group with members (or forming) is not deleted."""
    if group is None or group.is_in(S.DEAD):
        return ErrorCode.GROUP_ID_NOT_FOUND
    if group.is_in(S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE):
        return ErrorCode.NON_EMPTY_GROUP
    return ErrorCode.NONE
