"""The admin APIs over all of a shard's groups, classic and consumer (KIP-848): DescribeGroups,
ListGroups, DeleteGroups, as Kafka 4.x's ``GroupMetadataManager`` and ``GroupCoordinatorShard``
serve them.

Read-only except DeleteGroups, which only returns tombstones (the group's offsets first, then the
group's own records); the groups disappear when those are replayed. As in Kafka, DescribeGroups
and DeleteGroups accept the empty group id (only a null one is invalid), for backwards
compatibility.

- ListGroups lists both types: a consumer group with protocol type "consumer", its state (Empty,
  Assigning, Reconciling, Stable) and group type "consumer" (Kafka's ``ModernGroup.asListedGroup``).
  The v4 states filter and the v5 types filter are case-insensitive; a type Kafka does not know
  matches no group (``Group.GroupType.parse`` gives UNKNOWN).
- DescribeGroups is the classic protocol's API: Kafka's ``describeGroups`` looks the id up as a
  classic group only, so a consumer group is described as a missing one: state Dead, and from v6
  GROUP_ID_NOT_FOUND with "Group <id> is not a classic group." (ConsumerGroupDescribe describes it).
- DeleteGroups deletes an Empty consumer group (``ConsumerGroup.validateDeleteGroup``; else
  NON_EMPTY_GROUP): its offsets' tombstones, then ``consumer_group_tombstones`` in Kafka's
  ``createGroupTombstoneRecords`` order.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

from .classic import admin as classic_admin
from .classic.group import CONSUMER_PROTOCOL_TYPE, ClassicGroupState
from .classic.store import ClassicGroups
from .consumer.group import ConsumerGroup
from .consumer.store import ConsumerGroups
from .events import GroupDeleted
from .records import consumer_group_tombstones
from .result import RequestContext, Result

CONSUMER_GROUP_TYPE = "consumer"
_DEAD = ClassicGroupState.DEAD.value


class GroupAdmin:
    def __init__(
        self,
        classic: ClassicGroups,
        consumer: ConsumerGroups,
        delete_offsets: Callable[[str, Result], None],
        log: logging.Logger,
    ) -> None:
        self.classic = classic
        self.consumer = consumer
        self._delete_offsets = delete_offsets  # appends the tombstones of every offset of a group
        self.log = log

    # -- DescribeGroups -----------------------------------------------------------------------------
    def describe_groups(self, ctx: RequestContext, req: m.DescribeGroupsRequest, out: Result) -> None:
        R = m.DescribeGroupsResponse
        Described = R.DescribedGroup
        # Most ids of a large request may name no group (a client probing, or a hostile one naming
        # 20,000): their entries are built inline, and their error message only where it is sent (v6+).
        with_message = ctx.api_version >= 6
        not_found = int(ErrorCode.GROUP_ID_NOT_FOUND)
        classic = self.classic.groups
        consumer = self.consumer.groups
        described = []
        for group_id in req.groups:
            if group_id is None:
                described.append(Described(group_id="", error_code=int(ErrorCode.INVALID_GROUP_ID)))
                continue
            group = classic.get(group_id)
            if group is not None:
                described.append(classic_admin.describe_group(group))
            elif group_id in consumer:
                described.append(_not_found(ctx, group_id, f"Group {group_id} is not a classic group."))
            elif with_message:
                described.append(
                    Described(
                        group_id=group_id,
                        group_state=_DEAD,
                        error_code=not_found,
                        error_message=f"Group {group_id} not found.",
                    )
                )
            else:
                described.append(Described(group_id=group_id, group_state=_DEAD))
        out.reply(ctx, R(groups=described))

    # -- ListGroups ---------------------------------------------------------------------------------
    def list_groups(self, ctx: RequestContext, req: m.ListGroupsRequest, out: Result) -> None:
        states = {s.strip().lower() for s in req.states_filter} if ctx.api_version >= 4 else set()
        types = {t.lower() for t in req.types_filter} if ctx.api_version >= 5 else set()

        def wanted(group_type: str, state: str) -> bool:
            return (not states or state.lower() in states) and (not types or group_type in types)

        listed = [
            classic_admin.listed_group(group)
            for group in self.classic.groups.values()
            if wanted(classic_admin.GROUP_TYPE, group.state_name)
        ]
        listed.extend(
            _listed_consumer_group(group)
            for group in self.consumer.groups.values()
            if wanted(CONSUMER_GROUP_TYPE, group.state_name)
        )
        out.reply(ctx, m.ListGroupsResponse(error_code=0, groups=listed))

    # -- DeleteGroups -------------------------------------------------------------------------------
    def delete_groups(self, ctx: RequestContext, req: m.DeleteGroupsRequest, out: Result) -> None:
        R = m.DeleteGroupsResponse
        results = []
        for group_id in req.groups_names:
            error = self._delete(group_id, out)
            results.append(R.DeletableGroupResult(group_id=group_id or "", error_code=int(error)))
        out.reply(ctx, R(results=results))

    def _delete(self, group_id: str | None, out: Result) -> ErrorCode:
        """Kafka's ``GroupCoordinatorShard.deleteGroups`` for one id: validate, then the offsets'
        tombstones, then the group's."""
        if group_id is None:
            return ErrorCode.INVALID_GROUP_ID
        consumer_group = self.consumer.get(group_id)
        if consumer_group is not None:
            error = consumer_group.validate_delete()
        else:
            error = classic_admin.validate_delete(self.classic.groups.get(group_id))
        if error != ErrorCode.NONE:
            return error
        self._delete_offsets(group_id, out)
        if consumer_group is not None:
            out.records.extend(consumer_group_tombstones(consumer_group))
        else:
            out.records.extend(self.classic.tombstone_records(group_id))
        out.emit(GroupDeleted(group_id, "delete_groups"))
        self.log.info("group %s: deleted by DeleteGroups", group_id)
        return ErrorCode.NONE


def _not_found(ctx: RequestContext, group_id: str, message: str) -> Any:
    """Kafka's answer for an id that names no classic group: Dead, and an error from v6 on."""
    R = m.DescribeGroupsResponse
    if ctx.api_version >= 6:
        return R.DescribedGroup(
            group_id=group_id,
            group_state=_DEAD,
            error_code=int(ErrorCode.GROUP_ID_NOT_FOUND),
            error_message=message,
        )
    return R.DescribedGroup(group_id=group_id, group_state=_DEAD)


def _listed_consumer_group(group: ConsumerGroup) -> Any:
    return m.ListGroupsResponse.ListedGroup(
        group_id=group.group_id,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        group_state=group.state_name,
        group_type=CONSUMER_GROUP_TYPE,
    )
