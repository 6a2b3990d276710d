"""Transactional offset commits through the shard runtime, on the memory log.

The flow a consume-transform-produce client drives, with kcoord's parts real and the cluster's
parts played by the memory storage: AddOffsetsToTxn (``TransactionOffsets``: the shard's partition
joins the transaction upstream, then the transaction opens in the shard's log), TxnOffsetCommit
(a transactional batch of the client's producer), the transaction coordinator's marker (written
into the log, which the runtime follows), and loads of the log at any point. After every step the
live shard's durable state equals that of a fresh load of the log.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kcoord.coordinator.core.clock import ManualClock
from kcoord.coordinator.core.group_config import GroupConfig
from kcoord.coordinator.core.result import RequestContext
from kcoord.coordinator.core.shard_state import GroupCoordinatorShard
from kcoord.coordinator.runtime.router import Router
from kcoord.coordinator.runtime.shard import ShardRuntime
from kcoord.coordinator.runtime.transactions import TransactionOffsets
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.messages import ApiKey
from kcoord.protocol.records import EndTxnMarker, TransactionalRecords
from kcoord.storage.base import TXN_OPEN_KEY
from kcoord.storage.memory import MemoryShardLog, MemoryStorage, TxnBatch
from tests.unit.classic_context import ClassicContext

TXN_ID = "ctp-1"
PID = 4000


class Cluster:
    """One shard on the memory storage, with the runtime and the AddOffsetsToTxn service."""

    def __init__(self, max_in_flight: int = 1) -> None:
        self.max_in_flight = max_in_flight
        self.clock = ManualClock(1_700_000_000_000)
        self.storage = MemoryStorage()
        self.runtime: ShardRuntime | None = None

    async def start(self) -> ShardRuntime:
        await self.storage.open(1)
        return await self.restart()

    async def restart(self) -> ShardRuntime:
        """A new process: a fresh runtime loads the shard's log."""
        if self.runtime is not None:
            self.runtime.close()
        self.runtime = ShardRuntime(
            0,
            lambda: GroupCoordinatorShard(GroupConfig(), self.clock),
            self.log,
            self.clock,
            follow_interval=0.005,
            marker_wait=0.2,
            max_in_flight=self.max_in_flight,
        )
        await self.runtime.load()
        self.service = TransactionOffsets(Router([self.runtime]), self.storage)
        return self.runtime

    @property
    def log(self) -> MemoryShardLog:
        return self.storage.shard_log(0)

    @property
    def rt(self) -> ShardRuntime:
        assert self.runtime is not None
        return self.runtime

    async def add_offsets(self, group: str = "g", epoch: int = 0, pid: int = PID, version: int = 3) -> int:
        req = m.AddOffsetsToTxnRequest(
            transactional_id=TXN_ID, producer_id=pid, producer_epoch=epoch, group_id=group
        )
        resp = await self.service.add_offsets_to_txn(RequestContext(version), req)
        return int(resp.error_code)

    async def txn_commit(
        self,
        offsets: dict[tuple[str, int], int],
        group: str = "g",
        epoch: int = 0,
        pid: int = PID,
        **member: Any,
    ) -> dict[tuple[str, int], int]:
        T = m.TxnOffsetCommitRequest
        topics: dict[str, list[Any]] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append(
                T.TxnOffsetCommitRequestPartition(partition_index=partition, committed_offset=offset)
            )
        req = T(
            transactional_id=TXN_ID, group_id=group, producer_id=pid, producer_epoch=epoch,
            generation_id_or_member_epoch=member.get("generation", -1), member_id=member.get("member_id", ""),
            topics=[T.TxnOffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()],
        )  # fmt: skip
        resp = await self.rt.submit(ApiKey.TXN_OFFSET_COMMIT, RequestContext(3), req)
        return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}

    async def commit(self, offsets: dict[tuple[str, int], int], group: str = "g") -> None:
        R = m.OffsetCommitRequest
        topics: dict[str, list[Any]] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append(
                R.OffsetCommitRequestPartition(partition_index=partition, committed_offset=offset)
            )
        req = R(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                topics=[R.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()])  # fmt: skip
        resp = await self.rt.submit(ApiKey.OFFSET_COMMIT, RequestContext(8), req)
        assert all(p.error_code == 0 for t in resp.topics for p in t.partitions)

    async def fetch(
        self, partitions: list[tuple[str, int]], group: str = "g"
    ) -> dict[tuple[str, int], tuple[int, int]]:
        """(offset, error) per partition of an OffsetFetch with RequireStable."""
        R = m.OffsetFetchRequest
        topics: dict[str, list[int]] = {}
        for topic, partition in partitions:
            topics.setdefault(topic, []).append(partition)
        req = R(group_id=group, require_stable=True,
                topics=[R.OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in topics.items()])  # fmt: skip
        resp = await self.rt.submit(ApiKey.OFFSET_FETCH, RequestContext(7), req)
        return {
            (t.name, p.partition_index): (p.committed_offset, p.error_code)
            for t in resp.topics
            for p in t.partitions
        }

    async def marker(self, committed: bool, epoch: int = 0, pid: int = PID) -> None:
        """The transaction coordinator ends the transaction; the runtime finds the marker by following."""
        self.log.write_marker(pid, epoch, committed)
        for _ in range(200):
            await asyncio.sleep(0.005)
            if pid not in self.rt.state.offsets.pending.producers:  # type: ignore[attr-defined]
                return
        raise AssertionError("the runtime did not follow the marker")

    async def assert_log_rebuilds_the_shard(self) -> None:
        fresh = ShardRuntime(
            0, lambda: GroupCoordinatorShard(GroupConfig(), self.clock), MemoryShardLog(), self.clock
        )
        fresh.log.entries = list(self.log.entries)  # type: ignore[attr-defined]
        await fresh.load()
        assert fresh.state.durable_view() == self.rt.state.durable_view()  # type: ignore[attr-defined]
        fresh.close()


@pytest.fixture(params=[1, 5], ids=["appends-1", "appends-5"])
async def cluster(request: pytest.FixtureRequest) -> Any:
    """Every test once with one append in flight per shard and once pipelined (at most 5)."""
    c = Cluster(max_in_flight=request.param)
    await c.start()
    yield c
    c.rt.close()


T0, T1 = ("t", 0), ("t", 1)


async def test_a_committed_transaction_makes_its_offsets_visible_at_its_marker(cluster: Cluster) -> None:
    c = cluster
    assert await c.add_offsets() == E.NONE
    assert c.storage.added_partitions == [(TXN_ID, PID, 0, 0)]
    # The transaction is open in the log: one transactional batch holding the placeholder record.
    (opened,) = c.log.entries
    assert (
        isinstance(opened, TxnBatch) and opened.pairs == [(TXN_OPEN_KEY, None)] and opened.producer_id == PID
    )
    assert await c.txn_commit({T0: 10, T1: 11}) == {T0: 0, T1: 0}
    assert isinstance(c.log.entries[-1], TxnBatch) and len(c.log.entries[-1].pairs) == 2
    assert await c.fetch([T0, T1]) == {T0: (-1, E.UNSTABLE_OFFSET_COMMIT), T1: (-1, E.UNSTABLE_OFFSET_COMMIT)}
    await c.assert_log_rebuilds_the_shard()
    await c.marker(committed=True)
    assert await c.fetch([T0, T1]) == {T0: (10, 0), T1: (11, 0)}
    await c.assert_log_rebuilds_the_shard()


async def test_an_aborted_transaction_never_shows_its_offsets(cluster: Cluster) -> None:
    c = cluster
    await c.commit({T0: 5})
    assert await c.add_offsets() == E.NONE
    assert await c.txn_commit({T0: 10}) == {T0: 0}
    await c.marker(committed=False)
    assert await c.fetch([T0]) == {T0: (5, 0)}
    await c.assert_log_rebuilds_the_shard()
    await c.restart()
    assert await c.fetch([T0]) == {T0: (5, 0)}


async def test_a_commit_without_add_offsets_to_txn_or_after_its_end_is_invalid_txn_state(
    cluster: Cluster,
) -> None:
    """Kafka's transaction verification (KIP-890 part 1): the group's partition must be in the
    producer's ongoing transaction. Nothing is written either way."""
    c = cluster
    assert await c.txn_commit({T0: 10}) == {T0: E.INVALID_TXN_STATE}
    assert c.log.entries == []
    assert await c.add_offsets() == E.NONE
    assert await c.txn_commit({T0: 10}) == {T0: 0}
    await c.marker(committed=True)
    entries = len(c.log.entries)
    assert await c.txn_commit({T0: 99}) == {T0: E.INVALID_TXN_STATE}
    assert len(c.log.entries) == entries
    assert await c.fetch([T0]) == {T0: (10, 0)}


async def test_a_marker_already_in_the_log_is_replayed_before_the_next_transaction_opens(
    cluster: Cluster,
) -> None:
    """The runtime catches up on markers before AddOffsetsToTxn opens a transaction, so the previous
    transaction's marker never resolves the next one's offsets."""
    c = cluster
    c.rt.follow_interval = 3600.0  # only catch-ups find markers in this test
    assert await c.add_offsets() == E.NONE
    assert await c.txn_commit({T0: 10}) == {T0: 0}
    c.log.write_marker(PID, 0, committed=True)  # not followed yet
    assert await c.add_offsets() == E.NONE  # the next transaction
    assert await c.txn_commit({T0: 20}) == {T0: 0}
    assert await c.fetch([T0]) == {T0: (-1, E.UNSTABLE_OFFSET_COMMIT)}
    assert c.rt.state.offsets.store.get("g", "t", 0).offset == 10  # type: ignore[attr-defined]
    c.log.write_marker(PID, 0, committed=False)
    await c.rt.catch_up()
    assert await c.fetch([T0]) == {T0: (10, 0)}
    await c.assert_log_rebuilds_the_shard()


async def test_a_transaction_open_in_the_log_survives_a_restart(cluster: Cluster) -> None:
    """kill -9 between AddOffsetsToTxn and TxnOffsetCommit: the transaction is open in the log, so
    the restarted shard takes the commit, and the marker still decides."""
    c = cluster
    assert await c.add_offsets() == E.NONE
    await c.restart()
    assert await c.txn_commit({T0: 10}) == {T0: 0}
    await c.restart()
    assert await c.fetch([T0]) == {T0: (-1, E.UNSTABLE_OFFSET_COMMIT)}
    await c.marker(committed=True)
    assert await c.fetch([T0]) == {T0: (10, 0)}
    await c.assert_log_rebuilds_the_shard()


async def test_a_zombie_producer_is_fenced(cluster: Cluster) -> None:
    """A producer re-initialised (epoch 1; the coordinator aborted epoch 0's transaction): the old
    epoch's AddOffsetsToTxn gets the upstream's PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2),
    and its TxnOffsetCommit INVALID_PRODUCER_EPOCH; no offset of it is ever visible."""
    c = cluster
    assert await c.add_offsets(epoch=0) == E.NONE
    await c.marker(committed=False, epoch=1)  # InitProducerId of the new instance aborted epoch 0
    assert await c.add_offsets(epoch=1) == E.NONE
    assert await c.txn_commit({T0: 7}, epoch=1) == {T0: 0}
    assert await c.txn_commit({T0: 666}, epoch=0) == {T0: E.INVALID_PRODUCER_EPOCH}
    c.storage.add_partition_errors[PID] = E.PRODUCER_FENCED
    assert await c.add_offsets(epoch=0) == E.PRODUCER_FENCED
    assert await c.add_offsets(epoch=0, version=1) == E.INVALID_PRODUCER_EPOCH
    del c.storage.add_partition_errors[PID]
    await c.marker(committed=True, epoch=1)
    assert await c.fetch([T0]) == {T0: (7, 0)}
    await c.assert_log_rebuilds_the_shard()


async def test_a_transactional_batch_the_cluster_refuses_answers_the_client_and_reloads(
    cluster: Cluster,
) -> None:
    """The upstream refuses the batch for the producer's sake (fenced between kcoord's check and the
    append): the client gets that error, the shard reloads (its state had replayed the batch) and
    holds exactly what the log holds; other groups are served again."""
    c = cluster
    await c.commit({T0: 1}, group="other")
    assert await c.add_offsets() == E.NONE
    c.log.refuse_transactional.append(E.PRODUCER_FENCED)
    assert await c.txn_commit({T0: 10}) == {T0: E.PRODUCER_FENCED}
    for _ in range(100):
        if c.rt.loaded:
            break
        await asyncio.sleep(0.01)
    assert not c.rt.fenced
    assert await c.fetch([T0]) == {T0: (-1, 0)}  # open transaction, but no pending offset of it
    assert await c.fetch([T0], group="other") == {T0: (1, 0)}
    await c.assert_log_rebuilds_the_shard()


async def test_plain_and_transactional_writes_reach_the_log_in_replay_order(cluster: Cluster) -> None:
    """A plain commit written after a pending transactional one wins at COMMIT (Kafka's log-order
    rule); the log holds them in that order, so a load agrees."""
    c = cluster
    assert await c.add_offsets() == E.NONE
    results = await asyncio.gather(c.txn_commit({T0: 10}), c.commit({T0: 3}), c.txn_commit({T1: 11}))
    assert results[0] == {T0: 0} and results[2] == {T1: 0}
    kinds = [type(e).__name__ for e in c.log.entries]
    assert kinds == ["TxnBatch", "TxnBatch", "tuple", "TxnBatch"]
    await c.marker(committed=True)
    assert await c.fetch([T0, T1]) == {T0: (3, 0), T1: (11, 0)}
    await c.assert_log_rebuilds_the_shard()


async def test_add_offsets_to_txn_twice_in_one_transaction_writes_once(cluster: Cluster) -> None:
    c = cluster
    assert await c.add_offsets(group="g") == E.NONE
    assert await c.add_offsets(group="h") == E.NONE  # another group on the same shard
    assert sum(isinstance(e, TxnBatch) for e in c.log.entries) == 1
    assert await c.txn_commit({T0: 1}, group="h") == {T0: 0}
    await c.marker(committed=True)
    assert await c.fetch([T0], group="h") == {T0: (1, 0)}


async def test_add_offsets_to_txn_on_a_loading_shard_is_load_in_progress(cluster: Cluster) -> None:
    c = cluster
    c.rt.loaded = False
    assert await c.add_offsets() == E.COORDINATOR_LOAD_IN_PROGRESS
    assert c.storage.added_partitions == []
    c.rt.loaded = True


def test_classic_group_transactional_fencing() -> None:
    """Kafka's ClassicGroup.validateOffsetCommit with isTransactional: member and generation
    checked when named; a commit naming no member is taken even from a group with members."""
    c = ClassicContext()
    (leader, _), generation = c.stable_group("g", 2)
    c.shard.replay_begin_transaction(PID, 0)  # AddOffsetsToTxn opened the transaction

    def txn_commit(offset: int, **member: Any) -> int:
        T = m.TxnOffsetCommitRequest
        req = T(
            transactional_id=TXN_ID, group_id="g", producer_id=PID, producer_epoch=0,
            generation_id_or_member_epoch=member.get("generation", -1), member_id=member.get("member_id", ""),
            topics=[T.TxnOffsetCommitRequestTopic(name="t", partitions=[T.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=offset)])],
        )  # fmt: skip
        resp = c.reply(c.send(ApiKey.TXN_OFFSET_COMMIT, 3, req))
        (code,) = {p.error_code for t in resp.topics for p in t.partitions}
        return int(code)

    assert txn_commit(1, member_id=leader, generation=generation) == E.NONE
    assert txn_commit(2, member_id=leader, generation=generation + 1) == E.ILLEGAL_GENERATION
    assert txn_commit(3, member_id="ghost", generation=generation) == E.UNKNOWN_MEMBER_ID
    assert txn_commit(4) == E.NONE  # no member named: old TxnOffsetCommit versions name none
    assert [w.batch.records[0].value.offset for w in c.txn_writes] == [1, 4]
    assert c.records[-1:] != []  # the group's own records only: offsets went to transactional batches
    assert all(r.key.__class__.__name__ != "OffsetCommitKey" for r in c.records)


async def test_markers_of_a_reloaded_log_are_read_once(cluster: Cluster) -> None:
    """A load reads the markers already written; following then starts after them."""
    c = cluster
    assert await c.add_offsets() == E.NONE
    assert await c.txn_commit({T0: 10}) == {T0: 0}
    c.log.write_marker(PID, 0, committed=True)
    await c.restart()
    assert await c.log.follow() == []
    assert not c.rt.has_open_transactions()
    assert await c.fetch([T0]) == {T0: (10, 0)}
    entries = [e for e in c.log.entries if isinstance(e, EndTxnMarker | TransactionalRecords)]
    assert entries == [EndTxnMarker(PID, 0, True)]


async def test_the_next_transaction_waits_for_the_previous_ones_marker(cluster: Cluster) -> None:
    """The client's EndTxn was answered (kcoord relays it and sees that), but the marker is not in
    the partition yet: the producer's next AddOffsetsToTxn (same epoch: transactions v1) waits for it,
    and gets CONCURRENT_TRANSACTIONS (retriable) if it does not come, as Kafka answers while a
    transaction's markers are being written. The late marker never ends the next transaction."""
    c = cluster
    c.rt.follow_interval = 3600.0  # only catch-ups find markers in this test
    assert await c.add_offsets() == E.NONE
    assert await c.txn_commit({T0: 10}) == {T0: 0}
    c.service.transaction_ended(PID)
    assert await c.txn_commit({T0: 11}) == {T0: E.INVALID_TXN_STATE}  # after its transaction ended
    added = len(c.storage.added_partitions)
    assert await c.add_offsets() == E.CONCURRENT_TRANSACTIONS
    # Not even added upstream: an upstream that is still writing the previous transaction's
    # markers may drop a partition added meanwhile (tansu), and then no marker ever comes.
    assert len(c.storage.added_partitions) == added
    asyncio.get_running_loop().call_later(0.05, c.log.write_marker, PID, 0, True)
    assert await c.add_offsets() == E.NONE  # waited for the marker
    assert await c.fetch([T0]) == {T0: (10, 0)}
    assert await c.txn_commit({T0: 20}) == {T0: 0}
    c.service.transaction_ended(PID)
    c.log.write_marker(PID, 0, committed=False)
    await c.rt.catch_up()
    assert await c.fetch([T0]) == {T0: (10, 0)}
    await c.assert_log_rebuilds_the_shard()


async def test_an_ended_transaction_not_open_in_a_shard_changes_nothing_there(cluster: Cluster) -> None:
    c = cluster
    c.service.transaction_ended(PID)  # its transaction never added this shard's partition
    assert await c.add_offsets() == E.NONE
    assert await c.txn_commit({T0: 1}) == {T0: 0}


class ForwardingNode:
    """Node A of a kcoord cluster: it relays the client's EndTxn and AddOffsetsToTxn, but the
    group's shard is node B's (the test's Cluster); forwarding goes through the wire encoding."""

    def __init__(self, b: Cluster) -> None:
        self.b = b
        # A's runtime of the shard: B serves it, so on A it is never loaded.
        unloaded = ShardRuntime(
            0, lambda: GroupCoordinatorShard(GroupConfig(), b.clock), MemoryShardLog(), b.clock
        )
        node_a_router = Router([unloaded])
        node_a_router.serves = lambda index: False  # type: ignore[method-assign]
        node_a_router.forward = self._forward  # type: ignore[method-assign]
        self.service = TransactionOffsets(node_a_router, b.storage)
        self.forwarded: list[Any] = []

    async def _forward(self, index: int, api_key: int, ctx: RequestContext, request: Any) -> Any:
        wire = type(request).decode(request.encode(ctx.api_version), ctx.api_version)
        self.forwarded.append((ctx.api_version, wire))
        response = await self.b.service.add_offsets_to_txn(RequestContext(ctx.api_version), wire)
        return type(response).decode(response.encode(ctx.api_version), ctx.api_version)

    async def add_offsets(self, version: int = 0) -> int:
        req = m.AddOffsetsToTxnRequest(
            transactional_id=TXN_ID, producer_id=PID, producer_epoch=0, group_id="g"
        )
        return int((await self.service.add_offsets_to_txn(RequestContext(version), req)).error_code)


async def test_in_a_cluster_the_ended_transaction_reaches_the_shards_node_with_the_forwarded_request(
    cluster: Cluster,
) -> None:
    """Node A relays the EndTxn, node B serves the group's shard: A's next forwarded AddOffsetsToTxn
    (librdkafka sends v0) goes at v3 with kcoord's tag, so B waits for the previous marker too."""
    c = cluster
    a = ForwardingNode(c)
    c.rt.follow_interval = 3600.0  # only catch-ups find markers in this test
    assert await a.add_offsets() == E.NONE
    assert a.forwarded[-1][0] == 0 and not a.forwarded[-1][1].unknown_tagged
    assert await c.txn_commit({T0: 10}) == {T0: 0}
    a.service.transaction_ended(PID)  # A relayed the EndTxn; B never saw it
    assert not c.rt.state.awaits_marker(PID)  # type: ignore[attr-defined]
    assert await a.add_offsets() == E.CONCURRENT_TRANSACTIONS  # the marker never came
    version, forwarded = a.forwarded[-1]
    assert version == 3 and forwarded.unknown_tagged == [(0x4B43, b"\x01")]
    asyncio.get_running_loop().call_later(0.05, c.log.write_marker, PID, 0, True)
    assert await a.add_offsets() == E.NONE  # a retry: the flag was spent, B still waits (ending)
    assert await c.txn_commit({T0: 20}) == {T0: 0}
    assert await a.add_offsets() == E.NONE  # the same transaction again: nothing to wait for
    assert not a.forwarded[-1][1].unknown_tagged
    c.log.write_marker(PID, 0, committed=True)
    await c.rt.catch_up()
    assert await c.fetch([T0]) == {T0: (20, 0)}
    await c.assert_log_rebuilds_the_shard()


async def test_a_transactional_batch_goes_out_alone_behind_the_appends_before_it() -> None:
    """Pipelined appends keep the log in replay order around a transactional batch: it waits for
    the plain append in flight, and the plain append after it waits for it."""
    c = Cluster(max_in_flight=5)
    await c.start()
    assert await c.add_offsets() == E.NONE
    log = c.log
    calls: list[str] = []
    gate = asyncio.Event()
    plain, transactional = log.append, log.append_transactional

    async def held_append(records: Any) -> None:
        calls.append("plain")
        await gate.wait()
        await plain(records)

    async def traced_transactional(*args: Any) -> None:
        calls.append("transactional")
        await transactional(*args)

    log.append = held_append  # type: ignore[method-assign]
    log.append_transactional = traced_transactional  # type: ignore[method-assign]
    first = asyncio.ensure_future(c.commit({T0: 1}))
    await asyncio.sleep(0.01)
    txn = asyncio.ensure_future(c.txn_commit({T1: 2}))
    await asyncio.sleep(0.01)
    second = asyncio.ensure_future(c.commit({T0: 3}))
    await asyncio.sleep(0.01)
    assert calls == ["plain"]
    gate.set()
    await asyncio.wait_for(asyncio.gather(first, txn, second), 5)
    assert calls == ["plain", "transactional", "plain"]
    assert [type(e).__name__ for e in log.entries[-3:]] == ["tuple", "TxnBatch", "tuple"]
    await c.assert_log_rebuilds_the_shard()
    c.rt.close()
