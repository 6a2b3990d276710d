"""The consumer groups of one shard and the replay of their records (Kafka's
``GroupMetadataManager.replay`` for record types 3-8 and 16).

A value for a group the shard does not know creates the group (a compacted log may start with any
of its records); a tombstone for one it does not know is ignored. A ConsumerGroupMetadata tombstone
deletes the group, once every other record of the group was tombstoned (:meth:`ConsumerGroup.check_deletable`).
Which group type owns a group id is the shard's business (:mod:`kcoord.coordinator.core.shard_state`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kcoord.protocol.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMetadataKey,
)

from .group import ConsumerGroup

_Apply = Callable[[ConsumerGroup, Any, Any], None]

# key type -> how its value (or tombstone) applies to the group
_APPLY: dict[type, _Apply] = {
    ConsumerGroupPartitionMetadataKey: lambda group, key, value: group.apply_partition_metadata(value),
    ConsumerGroupMemberMetadataKey: lambda group, key, value: group.apply_member_metadata(
        key.member_id, value
    ),
    ConsumerGroupTargetAssignmentMetadataKey: lambda group, key, value: (
        group.apply_target_assignment_metadata(value)
    ),
    ConsumerGroupTargetAssignmentMemberKey: lambda group, key, value: group.apply_target_assignment_member(
        key.member_id, value
    ),
    ConsumerGroupCurrentMemberAssignmentKey: lambda group, key, value: group.apply_current_assignment(
        key.member_id, value
    ),
    ConsumerGroupRegularExpressionKey: lambda group, key, value: group.apply_regular_expression(
        key.regular_expression, value
    ),
}


class ConsumerGroups:
    def __init__(self) -> None:
        self.groups: dict[str, ConsumerGroup] = {}

    def get(self, group_id: str) -> ConsumerGroup | None:
        return self.groups.get(group_id)

    def get_or_create(self, group_id: str) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ConsumerGroup(group_id)
        return group

    def remove(self, group_id: str) -> ConsumerGroup | None:
        group = self.groups.pop(group_id, None)
        if group is not None:
            group.mark_dead()
        return group

    def replay(self, key: Any, value: Any | None) -> None:
        """Apply one consumer-group record (``key`` is one of :data:`CONSUMER_GROUP_KEYS`)."""
        group_id: str = key.group_id
        if value is None and group_id not in self.groups:
            return
        group = self.get_or_create(group_id)
        if isinstance(key, ConsumerGroupMetadataKey):
            if value is not None:
                group.apply_group_metadata(value)
            else:
                group.check_deletable()
                self.remove(group_id)
            return
        _APPLY[type(key)](group, key, value)

    def view(self) -> dict[str, dict[str, Any]]:
        return {group_id: group.to_dict() for group_id, group in sorted(self.groups.items())}
