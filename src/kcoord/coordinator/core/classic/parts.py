"""The part records of split classic groups, as replay sees them (record type ``0x4B47``).

A classic group too large for one GroupMetadata record is written as part records followed by its
GroupMetadata record, which names the parts by write id and count
(:func:`kcoord.coordinator.core.records.group_metadata_records`). Replay keeps the members of parts
until the GroupMetadata record that names them arrives, and hands that record's replay the whole
value: exactly the value an unsplit record would hold.

Invariants:
- Parts are never applied on their own: a write cut short before its GroupMetadata record leaves
  parts that no record names, and they change no group.
- A GroupMetadata record is written right after its parts, so when it is replayed every part it
  names has just been replayed; the members of any other parts of the group are dropped then (only
  their keys are kept, for the tombstones of the next write).
- Every part key in the log that is not tombstoned is known here (per group id, whether the group
  lives or not), so a writer can tombstone the parts no record names any more; and a new write id
  is larger than any known one, so a write never overwrites a part the group's record names.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kcoord.protocol.records import GroupMetadataPartKey, GroupMetadataValue, MemberMetadata, group_parts_of


class MissingPartError(ValueError):
    """A GroupMetadata record names a part the log does not hold: the log lost records."""


@dataclass(slots=True)
class _GroupPartRecords:
    # (write id, index) of every part in the log not yet tombstoned
    keys: set[tuple[int, int]] = field(default_factory=set)
    # members of parts no GroupMetadata record has named yet, by (write id, index)
    pending: dict[tuple[int, int], list[MemberMetadata]] = field(default_factory=dict)


class GroupPartRecords:
    """The parts of every split classic group of one log (module docstring)."""

    def __init__(self) -> None:
        self._groups: dict[str, _GroupPartRecords] = {}

    def replay_part(self, key: GroupMetadataPartKey, value: GroupMetadataValue | None) -> None:
        """Keep a part until the GroupMetadata record that names it; a tombstone forgets it."""
        slot = (key.write_id, key.index)
        if value is None:
            known = self._groups.get(key.group)
            if known is not None:
                known.keys.discard(slot)
                known.pending.pop(slot, None)
                if not known.keys:
                    del self._groups[key.group]
            return
        known = self._groups.setdefault(key.group, _GroupPartRecords())
        known.keys.add(slot)
        known.pending[slot] = list(value.members)

    def whole_value(self, group_id: str, value: GroupMetadataValue) -> GroupMetadataValue:
        """``value`` with the members of the parts it names (``value`` itself when it names none).
        Raises :class:`MissingPartError` when a named part is not in the log."""
        parts = group_parts_of(value)
        known = self._groups.get(group_id)
        if parts is None:
            if known is not None:
                known.pending.clear()
            return value
        pending = known.pending if known is not None else {}
        members: list[MemberMetadata] = []
        for index in range(parts.count):
            chunk = pending.get((parts.write_id, index))
            if chunk is None:
                raise MissingPartError(
                    f"group {group_id}: its record names part {index} of write {parts.write_id}, "
                    "which the log does not hold"
                )
            members.extend(chunk)
        pending.clear()
        return GroupMetadataValue(
            protocol_type=value.protocol_type,
            generation=value.generation,
            protocol=value.protocol,
            leader=value.leader,
            current_state_timestamp=value.current_state_timestamp,
            members=members,
        )

    def next_write_id(self, group_id: str) -> int:
        """A write id larger than any of the group's parts in the log."""
        known = self._groups.get(group_id)
        return 1 + max((write_id for write_id, _ in known.keys), default=0) if known is not None else 1

    def keys_of(self, group_id: str) -> list[tuple[int, int]]:
        """(write id, index) of the group's parts in the log, in order."""
        known = self._groups.get(group_id)
        return sorted(known.keys) if known is not None else []

    def view(self) -> dict[str, list[tuple[int, int]]]:
        return {group_id: sorted(known.keys) for group_id, known in self._groups.items()}
