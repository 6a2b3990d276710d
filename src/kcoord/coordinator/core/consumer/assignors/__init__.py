"""Server-side partition assignors for KIP-848 consumer groups: "uniform" (the default) and "range".

Pure functions of a :class:`GroupSpec` (members, their subscriptions and current assignments) and a
:class:`TopicDescriber` (partition counts) to a :class:`GroupAssignment`, matching Apache Kafka's
group coordinator assignors (``org.apache.kafka.coordinator.group.assignor``). No I/O, no clock;
the same input always gives the same output. Rack-aware assignment is not implemented.
"""

from .assignment import GroupAssignment
from .assignor import PartitionAssignor
from .range import RangeAssignor
from .registry import DEFAULT_ASSIGNOR, SERVER_ASSIGNORS
from .spec import (
    GroupSpec,
    MemberAssignment,
    MemberSubscriptionAndAssignment,
    SubscriptionType,
    TopicDescriber,
    TopicIdT,
    TopicsMetadata,
    subscription_type_of,
)
from .uniform import UniformAssignor

__all__ = [
    "DEFAULT_ASSIGNOR",
    "SERVER_ASSIGNORS",
    "GroupAssignment",
    "GroupSpec",
    "MemberAssignment",
    "MemberSubscriptionAndAssignment",
    "PartitionAssignor",
    "RangeAssignor",
    "SubscriptionType",
    "TopicDescriber",
    "TopicIdT",
    "TopicsMetadata",
    "UniformAssignor",
    "subscription_type_of",
]
