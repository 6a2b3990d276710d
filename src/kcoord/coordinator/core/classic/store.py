"""The classic groups of one shard and the replay of their records (Kafka's
``GroupMetadataManager.replay`` for record type 2, GroupMetadata).

A value settles its group (:meth:`ClassicGroup.apply_metadata`), creating it first if the shard does
not know it (a compacted log may start with any group's last record); a tombstone deletes the group.
Which group type owns a group id is the shard's business (:mod:`kcoord.coordinator.core.shard_state`).

Unlike a consumer group, a classic group may exist before any of its records is replayed: a
JoinGroup's join phase owns the membership of a group it creates (:mod:`.manager`), and an offset
commit for an unknown group implies a "simple" group that no GroupMetadata record backs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kcoord.protocol.records import GroupMetadataKey, GroupMetadataValue

from ..clock import NowMs
from .group import ClassicGroup, ClassicGroupState


def _nothing_to_cancel(group: ClassicGroup) -> None:
    pass


class ClassicGroups:
    def __init__(self, now_ms: NowMs) -> None:
        self.groups: dict[str, ClassicGroup] = {}
        self.now_ms = now_ms
        # Told of every group removed, tombstone or not; the group manager cancels the group's
        # timers here, so a timer of a deleted group cannot fire on a new group with its id.
        self.on_removed: Callable[[ClassicGroup], None] = _nothing_to_cancel

    def get(self, group_id: str) -> ClassicGroup | None:
        return self.groups.get(group_id)

    def get_or_create(self, group_id: str) -> ClassicGroup:
        """The group with the id; a new Empty group with no protocol (a "simple" group) if none."""
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ClassicGroup(group_id, self.now_ms())
        return group

    def add(self, group: ClassicGroup) -> None:
        """A group a JoinGroup creates: its join phase runs before its first record is replayed."""
        self.groups[group.group_id] = group

    def remove(self, group_id: str) -> ClassicGroup | None:
        group = self.groups.pop(group_id, None)
        if group is not None:
            self.on_removed(group)
            group.state = ClassicGroupState.DEAD
        return group

    def replay(self, key: GroupMetadataKey, value: GroupMetadataValue | None) -> None:
        """Apply one GroupMetadata record: a tombstone deletes the group, a value settles it."""
        if value is None:
            self.remove(key.group)
            return
        self.get_or_create(key.group).apply_metadata(value)

    def view(self) -> dict[str, dict[str, Any] | None]:
        """Each group's last GroupMetadata value as plain data; a simple group (offsets only) is None."""
        return {
            group_id: None if group.snapshot is None else group.snapshot.to_dict()
            for group_id, group in self.groups.items()
        }
