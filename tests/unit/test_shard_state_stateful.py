"""Random join/sync/heartbeat/leave/commit/crash sequences against one shard (Hypothesis).

Clients behave like simple stock consumers of group "g" (static or dynamic, JoinGroup v0-v9):
they rejoin when told to, the leader range-assigns the 6 partitions of topic "t" over the members
its JoinGroup response names, and they commit offsets with their generation. A second group "s"
only stores offsets ("simple" commits). Invariants after every step:

- at most one member per instance id, and ``static_members`` describes exactly the static members;
- in a Stable group every partition is owned by exactly one member (the leader assigned them all);
- a Stable or Empty group is exactly its last GroupMetadata record, live and rebuilt from the log
  (durable group state changes only through a record's replay);
- the durable view of the live shard equals that of a fresh shard replaying every record so far;
- no request ever hit the handler's exception path, and no request was answered twice.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kcoord.coordinator.core.records import classic_group_record
from kcoord.coordinator.core.result import RequestContext
from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.records import GroupMetadataKey
from tests.unit.classic_context import (
    PARTITIONS,
    RANGE,
    ROUNDROBIN,
    TOPIC,
    ClassicContext,
    assigned_partitions,
    assignment,
    subscription,
)

GROUP = "g"
N_CLIENTS = 5


@dataclass
class Client:
    index: int
    join_version: int
    instance_id: str | None
    protocol_names: list[str]
    member_id: str = ""
    generation: int = -1
    protocol_name: str | None = None
    leader_members: list[str] | None = None  # set when this client must send the assignment
    join_ctx: RequestContext | None = None
    sync_ctx: RequestContext | None = None
    assignment: list[tuple[str, int]] = field(default_factory=list)

    @property
    def sync_version(self) -> int:
        return 5 if self.join_version >= 7 else 3 if self.join_version >= 5 else min(self.join_version, 2)

    @property
    def heartbeat_version(self) -> int:
        return 4 if self.join_version >= 5 else min(self.join_version, 2)

    def reset(self) -> None:
        self.member_id, self.generation, self.leader_members = "", -1, None


class _ErrorLog(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.failures: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.failures.append(self.format(record))


class ShardMachine(RuleBasedStateMachine):
    @initialize(
        versions=st.lists(
            st.one_of(st.integers(5, 9), st.integers(0, 9)), min_size=N_CLIENTS, max_size=N_CLIENTS
        ),
        static=st.lists(st.booleans(), min_size=N_CLIENTS, max_size=N_CLIENTS),
        prefs=st.lists(st.booleans(), min_size=N_CLIENTS, max_size=N_CLIENTS),
    )
    def setup(self, versions: list[int], static: list[bool], prefs: list[bool]) -> None:
        self.c = ClassicContext()
        self.errors = _ErrorLog()
        logging.getLogger("kcoord").addHandler(self.errors)
        self.clients = [
            Client(
                index=i,
                join_version=v,
                instance_id=f"instance-{i}" if s and v >= 5 else None,
                protocol_names=[ROUNDROBIN, RANGE] if p else [RANGE],
            )
            for i, (v, s, p) in enumerate(zip(versions, static, prefs, strict=True))
        ]

    def teardown(self) -> None:
        logging.getLogger("kcoord").removeHandler(self.errors)

    # -- responses ------------------------------------------------------------------------------------
    def _collect(self) -> None:
        for client in self.clients:
            if client.join_ctx is not None and self.c.answered(client.join_ctx):
                self._on_join(client, self.c.reply(client.join_ctx))
            if client.sync_ctx is not None and self.c.answered(client.sync_ctx):
                self._on_sync(client, self.c.reply(client.sync_ctx))

    def _on_join(self, client: Client, response: Any) -> None:
        client.join_ctx = None
        if response.error_code == E.NONE:
            client.member_id = response.member_id
            client.generation = response.generation_id
            client.protocol_name = response.protocol_name
            leads = response.leader == response.member_id and not response.skip_assignment
            client.leader_members = [mb.member_id for mb in response.members] if leads else None
        elif response.error_code == E.MEMBER_ID_REQUIRED:
            client.member_id = response.member_id
        elif response.error_code != E.REBALANCE_IN_PROGRESS:
            client.reset()

    def _on_sync(self, client: Client, response: Any) -> None:
        client.sync_ctx = None
        if response.error_code == E.NONE:
            client.assignment = assigned_partitions(response.assignment)
        elif response.error_code in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID):
            client.reset()

    # -- rules ------------------------------------------------------------------------------------------
    @rule(i=st.integers(0, N_CLIENTS - 1))
    def join(self, i: int) -> None:
        client = self.clients[i]
        if client.join_ctx is not None:
            return
        client.join_ctx = self.c.join(
            GROUP,
            client.member_id,
            version=client.join_version,
            instance_id=client.instance_id,
            protos=[(name, subscription(TOPIC)) for name in client.protocol_names],
            client_id=f"c{i}",
        )
        self._collect()

    @rule(members=st.lists(st.integers(0, N_CLIENTS - 1), min_size=1, max_size=N_CLIENTS, unique=True))
    def cooperative_round(self, members: list[int]) -> None:
        """Well-behaved clients: all (re)join, wait for the join phase, then all sync."""
        for i in members:
            self.join(i)
            if self.clients[i].join_ctx is None and self.clients[i].member_id:  # got MEMBER_ID_REQUIRED
                self.join(i)
        for _ in range(12):
            if all(self.clients[i].join_ctx is None for i in members):
                break
            self.c.sleep(1_000)
            self._collect()
        for i in sorted(members, key=lambda k: self.clients[k].leader_members is None):
            self.sync(i)

    @rule()
    def everyone_heartbeats(self) -> None:
        for i in range(N_CLIENTS):
            self.heartbeat(i)

    @rule(i=st.integers(0, N_CLIENTS - 1))
    def sync(self, i: int) -> None:
        client = self.clients[i]
        if client.sync_ctx is not None or client.generation < 0 or not client.member_id:
            return
        plan = None
        if client.leader_members is not None:
            members = sorted(client.leader_members)
            plan = {
                mid: assignment([p for p in range(PARTITIONS) if p % len(members) == k])
                for k, mid in enumerate(members)
            }
        client.sync_ctx = self.c.sync(
            GROUP,
            client.member_id,
            client.generation,
            version=client.sync_version,
            instance_id=client.instance_id,
            assignments=plan,
            protocol_name=client.protocol_name,
        )
        self._collect()

    @rule(i=st.integers(0, N_CLIENTS - 1))
    def heartbeat(self, i: int) -> None:
        client = self.clients[i]
        if not client.member_id:
            return
        response = self.c.heartbeat(
            GROUP,
            client.member_id,
            client.generation,
            version=client.heartbeat_version,
            instance_id=client.instance_id,
        )
        if response.error_code in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID):
            client.reset()
        self._collect()

    @rule(i=st.integers(0, N_CLIENTS - 1))
    def leave(self, i: int) -> None:
        client = self.clients[i]
        if not client.member_id:
            return
        if client.join_version >= 5:
            self.c.leave(GROUP, [(client.member_id, client.instance_id)], version=5, reason="bye")
        else:
            self.c.leave(GROUP, client.member_id, version=min(client.join_version, 2))
        client.reset()
        self._collect()

    @rule(i=st.integers(0, N_CLIENTS - 1))
    def restart(self, i: int) -> None:
        """The client process restarts: it forgets its member id without leaving, and rejoins (a
        static member with its instance id and an empty member id)."""
        client = self.clients[i]
        client.reset()
        client.join_ctx = client.sync_ctx = None
        self.join(i)
        if client.join_ctx is None and client.generation >= 0:
            self.sync(i)

    @rule(i=st.integers(0, N_CLIENTS - 1))
    def restart_after_a_round(self, i: int) -> None:
        """Everyone rebalances first, so a static client's restart usually meets a Stable group:
        its replacement is persisted without a rebalance (the record's replay swaps the ids)."""
        self.cooperative_round(list(range(N_CLIENTS)))
        self.restart(i)

    @rule(
        i=st.integers(0, N_CLIENTS - 1), partition=st.integers(0, PARTITIONS - 1), offset=st.integers(0, 1000)
    )
    def commit(self, i: int, partition: int, offset: int) -> None:
        client = self.clients[i]
        version = 8 if client.instance_id else max(2, client.join_version)
        self.c.commit(
            GROUP,
            {(TOPIC, partition): offset},
            member_id=client.member_id,
            generation_id=client.generation,
            instance_id=client.instance_id if version >= 7 else None,
            version=version,
        )
        self._collect()

    @rule(partition=st.integers(0, 2), offset=st.integers(0, 1000))
    def simple_commit(self, partition: int, offset: int) -> None:
        self.c.commit("s", {(TOPIC, partition): offset})

    @rule(ms=st.sampled_from([100, 1_000, 3_000, 6_000, 11_000, 61_000, 700_000]))
    def sleep(self, ms: int) -> None:
        self.c.sleep(ms)
        self._collect()

    @rule(group=st.sampled_from([GROUP, "s"]))
    def admin(self, group: str) -> None:
        self.c.describe(group, version=6)
        self.c.list_groups()
        self.c.delete_groups(group)
        self.c.fetch(group, None, version=8)

    @precondition(lambda self: self.c.records)
    @rule()
    def crash_and_reload(self) -> None:
        self.c.reload()
        for client in self.clients:
            client.join_ctx = client.sync_ctx = None

    # -- invariants -------------------------------------------------------------------------------------
    @invariant()
    def one_member_per_instance_id(self) -> None:
        for group in self.c.shard.classic.groups.values():
            instances = [
                mb.group_instance_id for mb in group.members.values() if mb.group_instance_id is not None
            ]
            assert len(instances) == len(set(instances))
            assert group.static_members == {
                mb.group_instance_id: mid
                for mid, mb in group.members.items()
                if mb.group_instance_id is not None
            }

    @invariant()
    def stable_group_owns_every_partition_once(self) -> None:
        group = self.c.group(GROUP)
        if group is None or group.state_name != "Stable":
            return
        owned = Counter(tp for mb in group.members.values() for tp in assigned_partitions(mb.assignment))
        assert owned == Counter({(TOPIC, p): 1 for p in range(PARTITIONS)}), owned

    @invariant()
    def settled_groups_are_their_last_record(self) -> None:
        """A Stable or Empty group is exactly what the last GroupMetadata record written for it
        holds (generation, protocol, leader, state timestamp, members, assignments), and the same
        group rebuilt from the log is too: a handler that changed a group's durable state without
        writing a record, or in a way its record's replay does not reproduce, fails here. During a
        rebalance the membership runs ahead of the log, as in Kafka, so only settled groups are
        held to it. A "simple" group (offsets only) has no record and no protocol."""
        last: dict[str, Any] = {}
        for record in self.c.records:
            if isinstance(record.key, GroupMetadataKey):
                last[record.key.group] = record.value
        fresh = self.c.fresh_replay()
        for group_id, group in self.c.shard.classic.groups.items():
            if group.state_name not in ("Stable", "Empty"):
                continue
            live = classic_group_record(group, group.assignments()).value
            expected = last.get(group_id)
            if expected is None:
                assert (
                    group.state_name == "Empty" and group.protocol_type is None and group.generation_id == 0
                )
                continue
            assert live.to_dict() == expected.to_dict(), (group_id, live, expected)
            rebuilt = fresh.classic.groups[group_id]
            assert classic_group_record(rebuilt, rebuilt.assignments()).value.to_dict() == expected.to_dict()
            assert group.snapshot is not None and group.snapshot.to_dict() == expected.to_dict()

    @invariant()
    def parked_join_count_matches_the_members(self) -> None:
        for group in self.c.shard.classic.groups.values():
            assert group.num_awaiting_join() == sum(1 for m in group.members.values() if m.is_awaiting_join)

    @invariant()
    def replaying_the_log_rebuilds_the_durable_state(self) -> None:
        assert self.c.shard.durable_view() == self.c.fresh_replay_view()

    @invariant()
    def no_handler_failed(self) -> None:
        assert self.errors.failures == []


ShardMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestShardState = ShardMachine.TestCase
