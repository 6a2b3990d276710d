"""What a server-side assignor returns: every member's target assignment (Kafka's ``GroupAssignment``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic

from .spec import MemberAssignment, TopicIdT


@dataclass(frozen=True, slots=True)
class GroupAssignment(Generic[TopicIdT]):
    """member id -> topic id -> partitions, for every member of the group.

    Unlike Kafka's, every member appears, with an empty mapping when it gets nothing, and no member
    maps a topic to an empty set. A mapping equal to the member's current assignment may be that very
    object (see :mod:`.spec`); the others are read-only views.
    """

    members: Mapping[str, MemberAssignment[TopicIdT]]
