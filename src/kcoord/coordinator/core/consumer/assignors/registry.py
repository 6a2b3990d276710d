"""The server-side assignors by name, and the default (Kafka's ``group.consumer.assignors``)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from .assignor import PartitionAssignor
from .range import RangeAssignor
from .uniform import UniformAssignor

# group.consumer.assignors = uniform,range (Kafka 4.0): a member that names no assignor gets the first.
SERVER_ASSIGNORS: Mapping[str, PartitionAssignor] = MappingProxyType(
    {assignor.name: assignor for assignor in (UniformAssignor(), RangeAssignor())}
)
DEFAULT_ASSIGNOR = "uniform"
