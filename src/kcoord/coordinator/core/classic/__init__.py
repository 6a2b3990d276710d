"""The classic (pre-KIP-848) consumer group protocol: group state, membership handlers, admin APIs."""

from .group import ClassicGroup, ClassicGroupState
from .manager import ClassicGroupManager
from .member import ClassicMember

__all__ = ["ClassicGroup", "ClassicGroupManager", "ClassicGroupState", "ClassicMember"]
