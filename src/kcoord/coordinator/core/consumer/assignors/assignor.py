"""The interface of a server-side assignor (Kafka's ``ConsumerGroupPartitionAssignor``)."""

from __future__ import annotations

from typing import Protocol

from .assignment import GroupAssignment
from .spec import GroupSpec, TopicDescriber, TopicIdT


class PartitionAssignor(Protocol):
    """Computes a group's target assignment. Pure: no I/O, no clock, the same input gives the same output."""

    @property
    def name(self) -> str:
        """What clients ask for in ConsumerGroupHeartbeat's ServerAssignor ("uniform", "range")."""
        ...

    def assign(
        self, group: GroupSpec[TopicIdT], topics: TopicDescriber[TopicIdT]
    ) -> GroupAssignment[TopicIdT]: ...
