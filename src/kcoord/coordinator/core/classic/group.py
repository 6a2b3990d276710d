"""The state of one classic group: membership, generation, protocol, and its durable snapshot.

This is a data structure with invariants, not a protocol handler (that is
:mod:`kcoord.coordinator.core.classic.manager`). It mirrors Kafka's ``ClassicGroup``:

- ``static_members`` maps every instance id of a member to that member's id, and nothing else:
  at most one member per instance id.
- ``leader_id`` names a member whenever the group has members, and is None only when it has none.
- ``protocol_type`` is fixed by the first member of a generation; every member supports at least
  one protocol that every other member supports (``supported_protocols`` counts them).
- Durable state — generation, protocol type and name, leader, state timestamp, and each member's
  persisted fields and assignment — is what a GroupMetadata record holds, and :meth:`apply_metadata`
  (the replay of that record, on the live path as on load) is what sets it in a settled group
  (Stable or Empty): a handler computes the next value and writes it, it does not set it itself.
- While a rebalance is in flight (PreparingRebalance, CompletingRebalance) the membership protocol
  runs ahead of the log, exactly like Kafka, which persists a group only when a generation completes
  its sync, when it becomes Empty, when it is created, or when a static member is replaced. A
  rebalance settles only through a record.
- ``snapshot`` is the last GroupMetadata value replayed for the group.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from enum import Enum

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import GroupMetadataValue

from .member import ClassicMember, Protocols

CONSUMER_PROTOCOL_TYPE = "consumer"


class ClassicGroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[ClassicGroupState, frozenset[ClassicGroupState]] = {
    ClassicGroupState.EMPTY: frozenset({ClassicGroupState.PREPARING_REBALANCE}),
    ClassicGroupState.PREPARING_REBALANCE: frozenset(
        {ClassicGroupState.STABLE, ClassicGroupState.COMPLETING_REBALANCE, ClassicGroupState.EMPTY}
    ),
    ClassicGroupState.COMPLETING_REBALANCE: frozenset({ClassicGroupState.PREPARING_REBALANCE}),
    ClassicGroupState.STABLE: frozenset({ClassicGroupState.COMPLETING_REBALANCE}),
    ClassicGroupState.DEAD: frozenset(ClassicGroupState),
}


class IllegalGroupTransition(RuntimeError):
    pass


class ClassicGroup:
    def __init__(self, group_id: str, now_ms: int) -> None:
        """An Empty group with no protocol at generation 0: what a JoinGroup or an offset commit
        for an unknown group creates, and what a loaded group's first record is applied to."""
        self.group_id = group_id
        self.state = ClassicGroupState.EMPTY
        self.previous_state = ClassicGroupState.DEAD
        self.current_state_timestamp: int | None = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, ClassicMember] = {}  # insertion order = Kafka's "first member"
        self._awaiting_join_count = [0]  # members with a parked JoinGroup; kept by ClassicMember
        self.static_members: dict[str, str] = {}
        self.pending_join_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.supported_protocols: Counter[str] = Counter()
        self.subscribed_topics: frozenset[str] | None = None
        self.new_member_added = False
        self.rebalance_started_ms: int | None = None  # when the current rebalance episode began (metrics)
        # Protocol preference lists of members a written record is about to add (a static member's
        # new id). The record stores only the selected protocol's metadata; the member keeps its
        # whole list on the live path, as Kafka's does. Soft state, consumed by apply_metadata.
        self.joining_protocols: dict[str, Protocols] = {}
        self.snapshot: GroupMetadataValue | None = None  # the last GroupMetadata value replayed

    # -- simple views -------------------------------------------------------------------------------
    @property
    def state_name(self) -> str:
        return self.state.value

    def is_in(self, *states: ClassicGroupState) -> bool:
        return self.state in states

    @property
    def is_empty(self) -> bool:
        return self.state is ClassicGroupState.EMPTY

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def member(self, member_id: str) -> ClassicMember:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    @property
    def num_members(self) -> int:
        return len(self.members)

    @property
    def num_static_members(self) -> int:
        return len(self.static_members)

    @property
    def num_dynamic_members(self) -> int:
        return len(self.members) - len(self.static_members)

    def num_awaiting_join(self) -> int:
        return self._awaiting_join_count[0]

    def has_all_members_joined(self) -> bool:
        return self.num_awaiting_join() == len(self.members) and not self.pending_join_members

    def not_yet_rejoined(self) -> list[ClassicMember]:
        return [member for member in self.members.values() if not member.is_awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((member.rebalance_timeout_ms for member in self.members.values()), default=0)

    def static_member_id(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_join_members

    @property
    def is_simple(self) -> bool:
        """A group that only holds committed offsets: no protocol, no members, nobody joining (Kafka's
        ``isSimpleGroup``). No record backs it, so a consumer group's records may take its place."""
        return (
            self.protocol_type is None
            and self.is_empty
            and not self.members
            and not self.pending_join_members
        )

    @property
    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[ClassicGroupState.PREPARING_REBALANCE]

    # -- fencing ----------------------------------------------------------------------------------
    def validate_member(self, member_id: str, instance_id: str | None) -> ErrorCode | None:
        """UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID checks of Kafka's ``ClassicGroup.validateMember``."""
        if instance_id is not None:
            current = self.static_member_id(instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if not self.has_member(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def validate_offset_commit(
        self, member_id: str, instance_id: str | None, generation: int, *, is_transactional: bool = False
    ) -> ErrorCode:
        """Kafka's ``ClassicGroup.validateOffsetCommit``: generation and static fencing, and
        "simple" commits (generation -1, no member) only to an Empty group. A transactional commit
        naming no member is accepted in any state (old TxnOffsetCommit versions name none), and is
        not held back while the group completes a rebalance."""
        # Every offset commit comes through here: plain attribute and identity checks, and
        # validate_member's rules inlined, rather than a call per rule.
        state = self.state
        if state is ClassicGroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and state is ClassicGroupState.EMPTY:
            return ErrorCode.NONE
        if generation >= 0 or member_id or instance_id is not None:
            if instance_id is not None:
                current = self.static_members.get(instance_id)
                if current is None:
                    return ErrorCode.UNKNOWN_MEMBER_ID
                if current != member_id:
                    return ErrorCode.FENCED_INSTANCE_ID
            if member_id not in self.members:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if generation != self.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
        elif not is_transactional and state is not ClassicGroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not is_transactional and state is ClassicGroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # -- transitions --------------------------------------------------------------------------------
    def transition_to(self, target: ClassicGroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise IllegalGroupTransition(f"group {self.group_id}: {self.state.value} -> {target.value}")
        self.previous_state = self.state
        self.state = target
        self.current_state_timestamp = now_ms

    def init_next_generation(self, now_ms: int) -> None:
        """Start the next generation once the join phase is over: Kafka's ``initNextGeneration``."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(ClassicGroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(ClassicGroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    # -- membership ---------------------------------------------------------------------------------
    def add(self, member: ClassicMember) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise ValueError(f"instance id {member.group_instance_id} is already a member")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.protocol_type != member.protocol_type:
            raise ValueError("the group's and the member's protocol types differ")
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._attach(member)
        self.supported_protocols.update(member.protocol_names())
        self.pending_join_members.discard(member.member_id)

    def _attach(self, member: ClassicMember) -> None:
        member.awaiting_join_count = self._awaiting_join_count
        if member.is_awaiting_join:
            self._awaiting_join_count[0] += 1

    def _detach(self, member: ClassicMember) -> None:
        if member.is_awaiting_join:
            self._awaiting_join_count[0] -= 1
        member.awaiting_join_count = None

    def remove(self, member_id: str) -> ClassicMember | None:
        removed = self.members.pop(member_id, None)
        if removed is not None:
            self._detach(removed)
            self.supported_protocols.subtract(removed.protocol_names())
            if removed.group_instance_id is not None:
                self.static_members.pop(removed.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        return removed

    def update_member(
        self,
        member: ClassicMember,
        protocols: Protocols,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
    ) -> None:
        self.supported_protocols.subtract(member.protocol_names())
        member.protocols = protocols
        self.supported_protocols.update(member.protocol_names())
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms

    def replace_static_member(
        self, instance_id: str, old_member_id: str, new_member_id: str
    ) -> ClassicMember:
        """Give a static member a new member id, keeping everything else. The caller answers any
        request the old id had parked (FENCED_INSTANCE_ID)."""
        old = self.members.pop(old_member_id)
        self._detach(old)
        new = ClassicMember(
            member_id=new_member_id,
            group_instance_id=old.group_instance_id,
            client_id=old.client_id,
            client_host=old.client_host,
            rebalance_timeout_ms=old.rebalance_timeout_ms,
            session_timeout_ms=old.session_timeout_ms,
            protocol_type=old.protocol_type,
            protocols=old.protocols,
            assignment=old.assignment,
        )
        self.members[new_member_id] = new
        self._attach(new)
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        self.pending_sync_members.discard(old_member_id)
        return new

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick any member that did; False if none did."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].is_awaiting_join:
            return True
        for member in self.members.values():
            if member.is_awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    # -- protocols ----------------------------------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        size = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == size and size > 0}

    def supports_protocols(self, protocol_type: str, protocol_names: set[str]) -> bool:
        """Whether a member with these protocols could join: any type and protocols to an Empty
        group (but not empty ones); else the same type and one protocol every member supports."""
        if self.is_empty:
            return bool(protocol_type) and bool(protocol_names)
        size = len(self.members)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols.get(name, 0) == size for name in protocol_names
        )

    def select_protocol(self) -> str:
        """Each member votes for its most preferred common protocol; the most votes wins (ties go
        to the protocol voted first, so the choice is deterministic)."""
        if not self.members:
            raise ValueError(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter(member.vote(candidates) for member in self.members.values())
        return max(votes, key=lambda name: votes[name])  # Counter keeps first-vote order on ties

    def select_protocol_replacing(self, member_id: str, protocols: Protocols) -> str:
        """:meth:`select_protocol` as it would be after ``member_id`` left and a member with
        ``protocols`` joined last (a static member's replacement), without changing the group."""
        replaced = self.members[member_id]
        counts = self.supported_protocols.copy()
        counts.subtract(replaced.protocol_names())
        counts.update({name for name, _ in protocols})
        size = len(self.members)
        candidates = {name for name, count in counts.items() if count == size}
        newcomer = ClassicMember(member_id="", group_instance_id=None, client_id="", client_host="",
                                 rebalance_timeout_ms=0, session_timeout_ms=0, protocol_type="",
                                 protocols=protocols)  # fmt: skip
        voters = [member for mid, member in self.members.items() if mid != member_id] + [newcomer]
        votes: Counter[str] = Counter(member.vote(candidates) for member in voters)
        return max(votes, key=lambda name: votes[name])

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """Topics the members subscribe to, when the group speaks the consumer protocol and its
        subscriptions parse (v0 is a prefix of every version); None when unknown."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                data = member.metadata(self.protocol_name)
                subscription, _ = m.ConsumerProtocolSubscription.decode_from(data, 2, 0)
                topics.update(subscription.topics)
        except Exception:  # noqa: BLE001 - any malformed subscription means "unknown", as in Kafka
            return None
        return frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.subscribed_topics is None:
            return self.uses_consumer_protocol
        return topic in self.subscribed_topics

    def offset_expiration_base(self) -> Callable[[int], int] | None:
        """Kafka's ``offsetExpirationCondition``: a function from an offset's commit timestamp to the
        time its retention counts from, or None when the group's offsets must not expire now.

        - Empty group with a protocol type: retention counts from when it became Empty.
        - Stable consumer-protocol group with known subscriptions: from the commit (and the caller
          skips subscribed topics).
        - No protocol type (a "simple" group that only stores offsets): from the commit.
        """
        if self.protocol_type:
            if self.is_empty:
                became_empty = self.current_state_timestamp
                return lambda commit_ts: became_empty if became_empty is not None else commit_ts
            if (
                self.uses_consumer_protocol
                and self.subscribed_topics is not None
                and self.is_in(ClassicGroupState.STABLE)
            ):
                return lambda commit_ts: commit_ts
            return None
        return lambda commit_ts: commit_ts

    # -- responses ----------------------------------------------------------------------------------
    def join_response_members(
        self, members: Iterable[ClassicMember] | None = None
    ) -> list[m.JoinGroupResponse.JoinGroupResponseMember]:
        """What the leader's JoinGroup response lists: ``members`` (default: the group's) with their
        metadata for the group's protocol."""
        JoinMember = m.JoinGroupResponse.JoinGroupResponseMember
        return [
            JoinMember(
                member_id=member.member_id,
                group_instance_id=member.group_instance_id,
                metadata=member.metadata(self.protocol_name),
            )
            for member in (self.members.values() if members is None else members)
        ]

    def assignments(self) -> dict[str, bytes]:
        return {member_id: member.assignment for member_id, member in self.members.items()}

    # -- replay -------------------------------------------------------------------------------------
    def apply_metadata(self, value: GroupMetadataValue) -> None:
        """Replay one GroupMetadata value: the only way a group's durable state changes, the same on
        the live path (right after a handler wrote it) as when a shard loads.

        The value settles the group: Stable with its members, or Empty, with exactly the value's
        generation, protocol, leader, state timestamp, and members' persisted fields and
        assignments. What the record does not hold stays with the members that remain (parked
        requests, the whole protocol preference list when it agrees with the record, ``is_new``).

        One value does not settle the group: the one that creates it (generation 0) while its first
        member's join phase is open. That join phase owns the membership, as it does in Kafka,
        and goes on; the value only becomes the group's snapshot.
        """
        self.snapshot = value
        if self.state is ClassicGroupState.PREPARING_REBALANCE and value.generation <= self.generation_id:
            return
        protocol = value.protocol
        live = self.members
        members: dict[str, ClassicMember] = {}
        for stored in value.members:
            protocols: Protocols = [(protocol or "", stored.subscription)]
            member = live.get(stored.member_id)
            known = member.protocols if member is not None else self.joining_protocols.get(stored.member_id)
            if known is not None and any(n == protocol and md == stored.subscription for n, md in known):
                protocols = known
            if member is None:
                member = ClassicMember(
                    member_id=stored.member_id,
                    group_instance_id=stored.group_instance_id,
                    client_id=stored.client_id,
                    client_host=stored.client_host,
                    rebalance_timeout_ms=0,
                    session_timeout_ms=0,
                    protocol_type=value.protocol_type,
                )
            member.group_instance_id = stored.group_instance_id
            member.client_id = stored.client_id
            member.client_host = stored.client_host
            # Records older than member metadata v1 have no rebalance timeout (-1): Kafka uses the session's.
            member.rebalance_timeout_ms = (
                stored.session_timeout if stored.rebalance_timeout == -1 else stored.rebalance_timeout
            )
            member.session_timeout_ms = stored.session_timeout
            member.protocol_type = value.protocol_type
            member.protocols = protocols
            member.assignment = stored.assignment
            members[stored.member_id] = member
        self.joining_protocols.clear()

        for member in live.values():
            self._detach(member)
        self.members = {}
        self.static_members = {}
        self.supported_protocols = Counter()
        for member in members.values():
            self.members[member.member_id] = member
            self._attach(member)
            self.supported_protocols.update(member.protocol_names())
            if member.group_instance_id is not None:
                self.static_members[member.group_instance_id] = member.member_id
            self.pending_join_members.discard(member.member_id)

        # A group with members takes the protocol type its members were stored with, as Kafka's load.
        self.protocol_type = value.protocol_type if members else (value.protocol_type or None)
        self.generation_id = value.generation
        self.protocol_name = protocol
        self.leader_id = value.leader if value.leader in members else next(iter(members), None)
        self.current_state_timestamp = (
            None if value.current_state_timestamp == -1 else value.current_state_timestamp
        )
        state = ClassicGroupState.STABLE if members else ClassicGroupState.EMPTY
        if state is not self.state:
            self.previous_state, self.state = self.state, state
        self.subscribed_topics = self.compute_subscribed_topics()
