"""A test context for the shard state, in the spirit of Kafka's GroupMetadataManagerTestContext.

It drives a :class:`GroupCoordinatorShard` the way the runtime does: every request is encoded
and decoded at its version first (so the handler sees exactly what a client of that version can
send), the records a call returns are appended to ``records`` and replayed at once, and every
reply is encoded and decoded at the version of the request it answers (which catches responses
of the wrong shape for that version). ``sleep(ms)`` moves the manual clock and fires timers.
"""

from __future__ import annotations

import itertools
from typing import Any

from kcoord.coordinator.core.clock import ManualClock
from kcoord.coordinator.core.group_config import GroupConfig
from kcoord.coordinator.core.result import RequestContext, Result, TransactionalWrite
from kcoord.coordinator.core.shard_state import GroupCoordinatorShard
from kcoord.coordinator.runtime.shard import replay_transaction_entry
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey
from kcoord.protocol.records import Record, decode_record, encode_record

TOPIC = "t"
PARTITIONS = 6
RANGE = "range"
ROUNDROBIN = "roundrobin"


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0 bytes (int16 version prefix), as a Java consumer sends."""
    return b"\x00\x00" + m.ConsumerProtocolSubscription(
        topics=list(topics) or [TOPIC], user_data=None
    ).encode(0)


def assignment(partitions: list[int], topic: str = TOPIC) -> bytes:
    body = m.ConsumerProtocolAssignment(
        assigned_partitions=[m.ConsumerProtocolAssignment.TopicPartition(topic=topic, partitions=partitions)],
        user_data=None,
    )
    return b"\x00\x00" + body.encode(0)


def assigned_partitions(data: bytes) -> list[tuple[str, int]]:
    if not data:
        return []
    decoded, _ = m.ConsumerProtocolAssignment.decode_from(data, 2, 0)
    return [(tp.topic, p) for tp in decoded.assigned_partitions for p in tp.partitions]


def protocols(*names: str, metadata: bytes | None = None) -> list[tuple[str, bytes]]:
    return [(name, subscription() if metadata is None else metadata) for name in (names or (RANGE,))]


class ClassicContext:
    def __init__(
        self, config: GroupConfig | None = None, start_ms: int = 1_700_000_000_000, **shard_options: Any
    ) -> None:
        """``shard_options`` go to every GroupCoordinatorShard made here (e.g. ``max_record_bytes``)."""
        self.config = config or GroupConfig()
        self.clock = ManualClock(start_ms)
        counter = itertools.count(1)
        self.new_member_id = lambda prefix: f"{prefix}-{next(counter)}"
        self.shard_options = shard_options
        self.shard = self._new_shard()
        self.records: list[Record] = []
        self.last_records: list[Record] = []
        self.txn_writes: list[TransactionalWrite] = []
        self._replies: dict[int, tuple[RequestContext, Any]] = {}  # id(ctx) -> (ctx, response)
        self.apply(self.shard.on_loaded())

    # -- plumbing -------------------------------------------------------------------------------------
    def _new_shard(self) -> GroupCoordinatorShard:
        return GroupCoordinatorShard(
            self.config, self.clock, new_member_id=self.new_member_id, **self.shard_options
        )

    def apply(self, result: Result) -> None:
        self.last_records = list(result.records)
        for record in result.records:
            # The stored bytes must decode to the same record: the log is Kafka's format.
            key_bytes, value_bytes = encode_record(record)
            decoded = decode_record(key_bytes, value_bytes)
            assert decoded is not None and decoded.key == record.key and decoded.value == record.value
            self.records.append(record)
            self.shard.replay(record)
        for write in result.transactional:  # a client's transactional batch: replayed as the runtime does
            self.txn_writes.append(write)
            replay_transaction_entry(self.shard, write.batch)
        for ctx, response in result.replies:
            assert id(ctx) not in self._replies, "a request was answered twice"
            wire = response.encode(ctx.api_version)
            self._replies[id(ctx)] = (ctx, type(response).decode(wire, ctx.api_version))

    def send(
        self, api_key: int, version: int, request: Any, client_id: str = "client", host: str = "/127.0.0.1"
    ) -> RequestContext:
        decoded = type(request).decode(request.encode(version), version)
        ctx = RequestContext(version, client_id, host)
        self.apply(self.shard.handle(api_key, ctx, decoded))
        return ctx

    def reply(self, ctx: RequestContext) -> Any | None:
        """The response for ``ctx`` if it has been answered (consumed), else None (parked)."""
        entry = self._replies.pop(id(ctx), None)
        return None if entry is None else entry[1]

    def answered(self, ctx: RequestContext) -> bool:
        return id(ctx) in self._replies

    def sleep(self, ms: int) -> None:
        """Advance time by ``ms``, stopping at every timer deadline on the way (like the runtime,
        which wakes up at ``next_deadline()``), so rescheduled timers count from their deadline."""
        target = self.clock.now_ms() + ms
        while True:
            deadline = self.shard.next_deadline()
            if deadline is None or deadline > target:
                break
            self.clock.advance(max(deadline - self.clock.now_ms(), 0))
            self.apply(self.shard.poll(self.clock.now_ms()))
        self.clock.advance(target - self.clock.now_ms())
        self.apply(self.shard.poll(self.clock.now_ms()))

    def reload(self) -> None:
        """Crash and load: a fresh shard replays every record written, then ``on_loaded``. Parked
        requests die with their connections."""
        self.shard = self._new_shard()
        for record in self.records:
            self.shard.replay(record)
        self._replies.clear()
        self.apply(self.shard.on_loaded())

    def group(self, group_id: str) -> Any:
        return self.shard.classic.groups.get(group_id)

    def fresh_replay(self) -> GroupCoordinatorShard:
        """A new shard that replayed every record written so far (not yet ``on_loaded``)."""
        fresh = GroupCoordinatorShard(self.config, ManualClock(self.clock.now_ms()))
        for record in self.records:
            fresh.replay(record)
        return fresh

    def fresh_replay_view(self) -> dict[str, Any]:
        return self.fresh_replay().durable_view()

    # -- request builders -----------------------------------------------------------------------------
    def join(
        self,
        group_id: str,
        member_id: str = "",
        *,
        version: int = 9,
        instance_id: str | None = None,
        protos: list[tuple[str, bytes]] | None = None,
        protocol_type: str = "consumer",
        session_timeout_ms: int = 10_000,
        rebalance_timeout_ms: int = 60_000,
        client_id: str = "client",
        host: str = "/127.0.0.1",
        reason: str | None = None,
    ) -> RequestContext:
        P = m.JoinGroupRequest.JoinGroupRequestProtocol
        request = m.JoinGroupRequest(
            group_id=group_id,
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            member_id=member_id,
            group_instance_id=instance_id,
            protocol_type=protocol_type,
            protocols=[P(name=n, metadata=md) for n, md in (protos if protos is not None else protocols())],
            reason=reason,
        )
        return self.send(ApiKey.JOIN_GROUP, version, request, client_id, host)

    def sync(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        *,
        version: int = 5,
        instance_id: str | None = None,
        assignments: dict[str, bytes] | None = None,
        protocol_type: str | None = "consumer",
        protocol_name: str | None = RANGE,
    ) -> RequestContext:
        A = m.SyncGroupRequest.SyncGroupRequestAssignment
        request = m.SyncGroupRequest(
            group_id=group_id,
            generation_id=generation_id,
            member_id=member_id,
            group_instance_id=instance_id,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignments=[A(member_id=k, assignment=v) for k, v in (assignments or {}).items()],
        )
        return self.send(ApiKey.SYNC_GROUP, version, request)

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        *,
        version: int = 4,
        instance_id: str | None = None,
    ) -> Any:
        request = m.HeartbeatRequest(
            group_id=group_id, generation_id=generation_id, member_id=member_id, group_instance_id=instance_id
        )
        return self.reply(self.send(ApiKey.HEARTBEAT, version, request))

    def leave(
        self,
        group_id: str,
        members: list[tuple[str, str | None]] | str,
        *,
        version: int = 5,
        reason: str | None = None,
    ) -> Any:
        I = m.LeaveGroupRequest.MemberIdentity  # noqa: E741
        if isinstance(members, str):
            request = m.LeaveGroupRequest(group_id=group_id, member_id=members,
                                          members=[I(member_id=members, group_instance_id=None, reason=reason)])  # fmt: skip
        else:
            request = m.LeaveGroupRequest(
                group_id=group_id,
                member_id=members[0][0] if members else "",
                members=[I(member_id=mid, group_instance_id=iid, reason=reason) for mid, iid in members],
            )
        return self.reply(self.send(ApiKey.LEAVE_GROUP, version, request))

    def commit(
        self,
        group_id: str,
        offsets: dict[tuple[str, int], int],
        *,
        member_id: str = "",
        generation_id: int = -1,
        instance_id: str | None = None,
        version: int = 9,
        metadata: str | None = "",
        retention_time_ms: int = -1,
    ) -> Any:
        T = m.OffsetCommitRequest.OffsetCommitRequestTopic
        P = m.OffsetCommitRequest.OffsetCommitRequestPartition
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append(
                P(
                    partition_index=partition,
                    committed_offset=offset,
                    committed_leader_epoch=3,
                    committed_metadata=metadata,
                )
            )
        request = m.OffsetCommitRequest(
            group_id=group_id,
            generation_id_or_member_epoch=generation_id,
            member_id=member_id,
            group_instance_id=instance_id,
            retention_time_ms=retention_time_ms,
            topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()],
        )
        return self.reply(self.send(ApiKey.OFFSET_COMMIT, version, request))

    def commit_errors(self, response: Any) -> dict[tuple[str, int], int]:
        return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}

    def fetch(self, group_id: str, topics: dict[str, list[int]] | None = None, *, version: int = 7) -> Any:
        if version >= 8:
            G = m.OffsetFetchRequest.OffsetFetchRequestGroup
            T = m.OffsetFetchRequest.OffsetFetchRequestTopics
            request = m.OffsetFetchRequest(
                groups=[
                    G(
                        group_id=group_id,
                        topics=None
                        if topics is None
                        else [T(name=t, partition_indexes=ps) for t, ps in topics.items()],
                    )
                ],  # fmt: skip
            )
        else:
            T7 = m.OffsetFetchRequest.OffsetFetchRequestTopic
            request = m.OffsetFetchRequest(
                group_id=group_id,
                topics=None
                if topics is None
                else [T7(name=t, partition_indexes=ps) for t, ps in topics.items()],
            )
        return self.reply(self.send(ApiKey.OFFSET_FETCH, version, request))

    def fetched(
        self, group_id: str, topics: dict[str, list[int]] | None = None, *, version: int = 7
    ) -> dict[tuple[str, int], int]:
        response = self.fetch(group_id, topics, version=version)
        tops = response.groups[0].topics if version >= 8 else response.topics
        return {(t.name, p.partition_index): p.committed_offset for t in tops for p in t.partitions}

    def describe(self, *group_ids: str, version: int = 5) -> Any:
        return self.reply(
            self.send(ApiKey.DESCRIBE_GROUPS, version, m.DescribeGroupsRequest(groups=list(group_ids)))
        )

    def list_groups(
        self, *, version: int = 5, states: list[str] | None = None, types: list[str] | None = None
    ) -> Any:
        request = m.ListGroupsRequest(states_filter=states or [], types_filter=types or [])
        return self.reply(self.send(ApiKey.LIST_GROUPS, version, request))

    def delete_groups(self, *group_ids: str, version: int = 2) -> Any:
        return self.reply(
            self.send(ApiKey.DELETE_GROUPS, version, m.DeleteGroupsRequest(groups_names=list(group_ids)))
        )

    def offset_delete(self, group_id: str, topics: dict[str, list[int]]) -> Any:
        T = m.OffsetDeleteRequest.OffsetDeleteRequestTopic
        P = m.OffsetDeleteRequest.OffsetDeleteRequestPartition
        request = m.OffsetDeleteRequest(
            group_id=group_id,
            topics=[T(name=t, partitions=[P(partition_index=p) for p in ps]) for t, ps in topics.items()],
        )
        return self.reply(self.send(ApiKey.OFFSET_DELETE, 0, request))

    # -- scenarios ------------------------------------------------------------------------------------
    def join_dynamic(self, group_id: str, *, version: int = 9, **kwargs: Any) -> RequestContext:
        """A dynamic member's JoinGroup; on v4+ first the MEMBER_ID_REQUIRED round trip."""
        if version < 4:
            return self.join(group_id, version=version, **kwargs)
        first = self.reply(self.join(group_id, version=version, **kwargs))
        assert first is not None and first.error_code == ErrorCode.MEMBER_ID_REQUIRED, first
        return self.join(group_id, first.member_id, version=version, **kwargs)

    def complete_initial_rebalance(self, ctxs: list[RequestContext]) -> None:
        """Sleep in initial-delay steps until every JoinGroup in ``ctxs`` is answered (each delay
        that saw a new member extends the initial rebalance, as in Kafka)."""
        for _ in range(1000):
            if all(self.answered(c) for c in ctxs):
                return
            self.sleep(max(self.config.initial_rebalance_delay_ms, 1))
        raise AssertionError("the initial rebalance never completed")

    def stable_group(
        self, group_id: str, n: int, *, static: bool = False, version: int = 9, **kwargs: Any
    ) -> tuple[list[str], int]:
        """Bring up a Stable group of ``n`` members whose leader assigned the 6 partitions; returns
        (member ids, leader first; generation)."""
        ctxs = []
        for i in range(n):
            if static:
                ctxs.append(self.join(group_id, instance_id=f"instance-{i}", version=version, **kwargs))
            else:
                ctxs.append(self.join_dynamic(group_id, version=version, **kwargs))
        self.complete_initial_rebalance(ctxs)
        responses = [self.reply(c) for c in ctxs]
        assert all(r is not None and r.error_code == 0 for r in responses), responses
        leader = responses[0].leader
        generation = responses[0].generation_id
        member_ids = [leader] + [r.member_id for r in responses if r.member_id != leader]
        plan = {mid: assignment(list(range(PARTITIONS))[i::n]) for i, mid in enumerate(member_ids)}
        group = self.group(group_id)
        sync_ctxs = [self.sync(group_id, mid, generation, assignments=plan if mid == leader else None,
                               instance_id=group.member(mid).group_instance_id,
                               protocol_type=group.protocol_type, protocol_name=group.protocol_name)
                     for mid in member_ids]  # fmt: skip
        for c in sync_ctxs:
            response = self.reply(c)
            assert response is not None and response.error_code == 0, response
        return member_ids, generation
