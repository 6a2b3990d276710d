"""The "uniform" assignor, Kafka's default server-side assignor: balanced, then sticky.

Kafka's ``UniformAssignor``: a group whose members all subscribe to the same topics takes the
homogeneous path (:mod:`.uniform_homogeneous`), any other group the heterogeneous one
(:mod:`.uniform_heterogeneous`). Not rack aware: later Kafka versions add rack matching here;
``racks_for_partition`` is in :class:`~.spec.TopicDescriber` for it, but nothing reads it yet.
"""

from __future__ import annotations

from .assignment import GroupAssignment
from .spec import GroupSpec, SubscriptionType, TopicDescriber, TopicIdT
from .uniform_heterogeneous import assign_heterogeneous
from .uniform_homogeneous import assign_homogeneous


class UniformAssignor:
    @property
    def name(self) -> str:
        return "uniform"

    def assign(
        self, group: GroupSpec[TopicIdT], topics: TopicDescriber[TopicIdT]
    ) -> GroupAssignment[TopicIdT]:
        if group.subscription_type is SubscriptionType.HOMOGENEOUS:
            return assign_homogeneous(group, topics)
        return assign_heterogeneous(group, topics)
