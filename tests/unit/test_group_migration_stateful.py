"""Random sequences of classic and consumer-protocol members migrating one group back and forth
(Hypothesis): consumer-protocol members join and leave (converting a classic group in use, and back
when the last one leaves), classic members rejoin eagerly or cooperatively, heartbeat, leave, let
their sessions lapse, and the shard restarts. After every step the log rebuilds the live state and
no partition has two owners, whichever type the group is."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kcoord.protocol.errors import ErrorCode
from tests.unit.classic_context import PARTITIONS, assigned_partitions, assignment, subscription
from tests.unit.test_group_migration import GROUP, Migration, _subscription_v1

CONSUMERS = ("c1", "c2")


class MigrationMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ctx = Migration()
        self.classic: dict[str, int] = {}  # classic member id -> the generation it last learnt
        self.epochs: dict[str, int] = {}  # consumer-protocol member -> its epoch (absent: not in)
        self.owned: dict[str, set[int]] = {}  # consumer-protocol member -> what it owns

    @initialize(n=st.integers(min_value=1, max_value=3))
    def classic_group(self, n: int) -> None:
        members, generation = self.ctx.stable_group(GROUP, n)
        self.classic = dict.fromkeys(members, generation)

    # -- consumer-protocol members ---------------------------------------------------------------------
    @rule(name=st.sampled_from(CONSUMERS))
    def consumer_heartbeat(self, name: str) -> None:
        epoch = self.epochs.get(name, 0)
        response = self.ctx.consumer_heartbeat(
            name, epoch, owned=self.owned.get(name, set()) if epoch else None, instance_id=f"static-{name}"
        )
        if response.error_code != ErrorCode.NONE:
            self.epochs.pop(name, None)
            self.owned.pop(name, None)
            return
        self.epochs[name] = response.member_epoch
        if response.assignment is not None:
            self.owned[name] = {p for tp in response.assignment.topic_partitions for p in tp.partitions}

    @rule(name=st.sampled_from(CONSUMERS))
    def consumer_leave(self, name: str) -> None:
        if name in self.epochs:
            self.ctx.consumer_heartbeat(name, -1, instance_id=f"static-{name}")
            self.epochs.pop(name)
            self.owned.pop(name, None)

    @rule(name=st.sampled_from(CONSUMERS))
    def consumer_restarts_as_classic(self, name: str) -> None:
        """A static consumer-protocol member restarts speaking the classic protocol: it leaves for a
        while (epoch -2) and its instance id joins with JoinGroup (maybe the join-time downgrade)."""
        if name not in self.epochs:
            return
        self.ctx.consumer_heartbeat(name, -2, instance_id=f"static-{name}")
        self.epochs.pop(name)
        self.owned.pop(name, None)
        join = self.ctx.reply(
            self.ctx.join(GROUP, instance_id=f"static-{name}", protos=[("range", subscription())])
        )
        if join is not None and join.error_code == ErrorCode.NONE:
            self.classic[join.member_id] = join.generation_id

    # -- classic members -------------------------------------------------------------------------------
    def _classic_member(self, data: st.DataObject) -> str | None:
        if not self.classic:
            return None
        return data.draw(st.sampled_from(list(self.classic)))  # in the order they joined

    @rule(data=st.data(), cooperative=st.booleans())
    def classic_rejoin(self, data: st.DataObject, cooperative: bool) -> None:
        member_id = self._classic_member(data)
        consumer_group = self.ctx.consumer_group()
        if member_id is None or consumer_group is None or member_id not in consumer_group.members:
            return
        owned = (
            sorted(p for _, p in consumer_group.members[member_id].held_partitions()) if cooperative else []
        )
        join = self.ctx.reply(self.ctx.join(GROUP, member_id, protos=[("range", _subscription_v1(owned))]))
        assert join is not None
        if join.error_code != ErrorCode.NONE:
            return
        self.classic[member_id] = join.generation_id
        sync = self.ctx.reply(self.ctx.sync(GROUP, member_id, join.generation_id))
        assert sync is not None and sync.error_code in (ErrorCode.NONE, ErrorCode.REBALANCE_IN_PROGRESS)

    @rule(data=st.data())
    def classic_heartbeat(self, data: st.DataObject) -> None:
        member_id = self._classic_member(data)
        if member_id is not None:
            self.ctx.heartbeat(GROUP, member_id, self.classic[member_id])

    @rule(data=st.data())
    def classic_leave(self, data: st.DataObject) -> None:
        member_id = self._classic_member(data)
        if member_id is not None:
            self.ctx.leave(GROUP, [(member_id, None)])
            del self.classic[member_id]

    @rule()
    def classic_rebalance(self) -> None:
        """When the group is a classic one rebalancing, its members rejoin and the leader assigns."""
        group = self.ctx.group(GROUP)
        if group is None or group.state_name != "PreparingRebalance":
            return
        joins = [
            self.ctx.join(GROUP, member_id, protos=[("range", subscription())])
            for member_id in list(group.members)
        ]
        responses = [self.ctx.reply(j) for j in joins]
        done = [r for r in responses if r is not None and r.error_code == ErrorCode.NONE]
        if len(done) != len(responses):
            return
        leader = done[0].leader
        ids = [r.member_id for r in done]
        plan = {mid: assignment(list(range(PARTITIONS))[i :: len(ids)]) for i, mid in enumerate(ids)}
        for r in done:
            self.ctx.sync(
                GROUP, r.member_id, r.generation_id, assignments=plan if r.member_id == leader else None
            )
            self.classic[r.member_id] = r.generation_id

    @rule(ms=st.sampled_from([1_000, 11_000, 60_000]))
    def sleep(self, ms: int) -> None:
        self.ctx.sleep(ms)
        present: set[str] = set()
        if (consumer_group := self.ctx.consumer_group()) is not None:
            present = set(consumer_group.members)
        elif (group := self.ctx.group(GROUP)) is not None:
            present = set(group.members)
        for member_id in list(self.classic):
            if member_id not in present:
                del self.classic[member_id]
        for name in list(self.epochs):
            if name not in present:
                self.epochs.pop(name)
                self.owned.pop(name, None)

    @rule()
    def restart(self) -> None:
        self.ctx.reload()

    # -- invariants ------------------------------------------------------------------------------------
    @invariant()
    def replay_rebuilds_the_live_state(self) -> None:
        assert self.ctx.fresh_replay_view() == self.ctx.shard.durable_view()

    @invariant()
    def the_counts_kept_by_replay_match_the_members(self) -> None:
        group = self.ctx.consumer_group()
        if group is not None:
            classic = [m for m in group.members.values() if m.uses_classic_protocol]
            assert group.num_classic_protocol_members == len(classic)

    @invariant()
    def a_partition_has_one_owner(self) -> None:
        if self.ctx.consumer_group() is not None:
            assert all(len(holders) == 1 for holders in self.ctx.owners().values()), self.ctx.owners()
            return
        group = self.ctx.group(GROUP)
        if group is None or group.state_name != "Stable":
            return
        seen: list[int] = []
        for member in group.members.values():
            seen.extend(p for _, p in assigned_partitions(member.assignment))
        assert len(seen) == len(set(seen)), seen


def _settings() -> Any:
    return settings(max_examples=60, stateful_step_count=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])  # fmt: skip


MigrationMachine.TestCase.settings = _settings()
test_migration_machine = MigrationMachine.TestCase
