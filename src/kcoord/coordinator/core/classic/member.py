"""One member of a classic group, as the coordinator remembers it between requests.

A member is *awaiting join* while its JoinGroup is parked (``awaiting_join`` holds that
request's context) and *awaiting sync* while its SyncGroup waits for the leader's assignment.
Parked contexts are always answered exactly once: by completing the phase, by an error when the
member is removed or fenced, or by an error when a newer request of the same member supersedes
them — the runtime keeps one future per context, so a dropped context would leak and stall the
connection's ordered responses.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kcoord.coordinator.core.result import RequestContext

Protocols = list[tuple[str, bytes]]  # (protocol name, metadata) in the member's preference order


@dataclass(eq=False, slots=True)
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols = field(default_factory=list)
    assignment: bytes = b""
    _awaiting_join: RequestContext | None = None
    awaiting_sync: RequestContext | None = None
    # The group's count of parked JoinGroups, shared by its members, so "has everyone joined?" is
    # O(1) per JoinGroup instead of a scan (a join storm of M members would otherwise be O(M^2)).
    awaiting_join_count: list[int] | None = field(default=None, repr=False)
    # A member added by this rebalance: its heartbeat deadline is the new-member join timeout, and
    # it can expire even while its JoinGroup is parked (Kafka's ClassicGroupMember.isNew).
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> RequestContext | None:
        return self._awaiting_join

    @awaiting_join.setter
    def awaiting_join(self, ctx: RequestContext | None) -> None:
        count = self.awaiting_join_count
        if count is not None:
            count[0] += (ctx is not None) - (self._awaiting_join is not None)
        self._awaiting_join = ctx

    @property
    def is_awaiting_join(self) -> bool:
        return self._awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def protocol_names(self) -> set[str]:
        return {name for name, _ in self.protocols}

    def metadata(self, protocol_name: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol_name:
                return metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol_name!r}")

    def matches(self, protocols: Protocols) -> bool:
        return protocols == self.protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        """A session expiry is ignored while an existing member takes part in a rebalance; new
        members can expire even while their JoinGroup is parked."""
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync
