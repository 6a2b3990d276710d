"""The classic groups of one shard and the replay of their records (Kafka's
``GroupMetadataManager.replay`` for record type 2, GroupMetadata).

A value settles its group (:meth:`ClassicGroup.apply_metadata`), creating it first if the shard does
not know it (a compacted log may start with any group's last record); a tombstone deletes the group.
Which group type owns a group id is the shard's business (:mod:`kcoord.coordinator.core.shard_state`).

A classic group too large for one record is stored split: its members in part records, then its
GroupMetadata record naming them (:mod:`.parts`); replay hands the group the whole value, so a
split group is the same state as an unsplit one. :meth:`ClassicGroups.records_for` is how every
writer of a group's record learns what to write: the record, split if need be, and the tombstones
of the group's parts its new record no longer names.

Unlike a consumer group, a classic group may exist before any of its records is replayed: a
JoinGroup's join phase owns the membership of a group it creates (:mod:`.manager`), and an offset
commit for an unknown group implies a "simple" group that no GroupMetadata record backs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kcoord.protocol.records import GroupMetadataKey, GroupMetadataPartKey, GroupMetadataValue, Record

from ..clock import NowMs
from ..records import group_metadata_records, group_part_tombstone, group_tombstone
from .group import ClassicGroup, ClassicGroupState
from .parts import GroupPartRecords


def _nothing_to_cancel(group: ClassicGroup) -> None:
    pass


class ClassicGroups:
    def __init__(self, now_ms: NowMs) -> None:
        self.groups: dict[str, ClassicGroup] = {}
        self.now_ms = now_ms
        # Told of every group removed, tombstone or not; the group manager cancels the group's
        # timers here, so a timer of a deleted group cannot fire on a new group with its id.
        self.on_removed: Callable[[ClassicGroup], None] = _nothing_to_cancel
        self.parts = GroupPartRecords()

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
        self.get_or_create(key.group).apply_metadata(self.parts.whole_value(key.group, value))

    def replay_part(self, key: GroupMetadataPartKey, value: GroupMetadataValue | None) -> None:
        """Apply one part record of a split group: kept until the group's record names it."""
        self.parts.replay_part(key, value)

    def records_for(self, record: Record, max_record_bytes: int) -> list[Record] | None:
        """What writes a group's GroupMetadata ``record`` (value or tombstone) to a log that takes
        records up to ``max_record_bytes``: the record, or its parts and itself when it is too large
        (None when it cannot be written at all), then tombstones for the group's parts in the log
        that the new record does not name. The tombstones come after the record: a write cut short
        before them leaves parts nobody names, which the next write of the group tombstones."""
        group_id = record.key.group
        if record.value is None:
            written = [record]
        else:
            split = group_metadata_records(record, max_record_bytes, self.parts.next_write_id(group_id))
            if split is None:
                return None
            written = split
        named = {(r.key.write_id, r.key.index) for r in written if isinstance(r.key, GroupMetadataPartKey)}
        written += [
            group_part_tombstone(group_id, write_id, index)
            for write_id, index in self.parts.keys_of(group_id)
            if (write_id, index) not in named
        ]
        return written

    def tombstone_records(self, group_id: str) -> list[Record]:
        """What deletes a classic group: its tombstone, then its parts' tombstones."""
        written = self.records_for(group_tombstone(group_id), 0)
        assert written is not None  # a tombstone always fits
        return written

    def parts_view(self) -> dict[str, list[tuple[int, int]]]:
        """The (write id, index) of every split group's parts in the log, by group id."""
        return self.parts.view()

    def view(self) -> dict[str, dict[str, Any] | None]:
        """Each group's last GroupMetadata value as plain data; a simple group (offsets only) is None."""
        return {
            group_id: None if group.snapshot is None else group.snapshot.to_dict()
            for group_id, group in self.groups.items()
        }
