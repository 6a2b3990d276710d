"""The classic (pre-KIP-848) consumer group protocol: group state, the groups of a shard and their
replay, membership handlers, admin APIs."""

from .group import ClassicGroup, ClassicGroupState
from .manager import ClassicGroupManager
from .member import ClassicMember
from .store import ClassicGroups

__all__ = ["ClassicGroup", "ClassicGroupManager", "ClassicGroupState", "ClassicGroups", "ClassicMember"]
