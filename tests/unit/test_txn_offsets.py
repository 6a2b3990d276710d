"""Transactional offset commits in the shard's state: pending per producer id
until the producer's marker, as Kafka's OffsetMetadataManager keeps them (``pendingTransactionalOffsets``,
``replayEndTransactionMarker``, ``hasPendingTransactionalOffsets``).

The log is the memory log (:class:`MemoryShardLog`): plain records as the shard writes them,
transactional batches and markers as a client's transaction and the transaction coordinator would
write them. The live shard replays each entry as it is written; a load replays what the log reads,
through the runtime's own dispatch (``replay_transaction_entry``), whole, compacted, or cut short.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kcoord.coordinator.core.clock import ManualClock
from kcoord.coordinator.core.group_config import GroupConfig
from kcoord.coordinator.core.records import offset_commit_record, offset_tombstone
from kcoord.coordinator.core.result import RequestContext, Result
from kcoord.coordinator.core.shard_state import GroupCoordinatorShard
from kcoord.coordinator.runtime.shard import ShardRuntime, replay_transaction_entry
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.messages import ApiKey
from kcoord.protocol.records import EndTxnMarker, Record, TransactionalRecords, encode_record
from kcoord.storage.memory import MemoryShardLog, TxnBatch
from tests.unit.classic_context import ClassicContext
from tests.unit.consumer_context import ConsumerLog

DAY = 24 * 3_600_000
UNSTABLE = int(E.UNSTABLE_OFFSET_COMMIT)


def commit_record(group: str, topic: str, partition: int, offset: int, timestamp: int = 1) -> Record:
    return offset_commit_record(group, topic, partition, offset=offset, leader_epoch=-1, metadata="",
                                commit_timestamp=timestamp)  # fmt: skip


class TxnContext(ClassicContext):
    """A classic-group context whose writes also go to a memory log, with transactions."""

    def __init__(self, config: GroupConfig | None = None) -> None:
        self.log = MemoryShardLog()
        self.snapshots: dict[int, dict[str, Any]] = {}  # log length -> live durable view then
        super().__init__(config)

    def apply(self, result: Result) -> None:
        self.log.entries.extend(encode_record(r) for r in result.records)
        super().apply(result)

    def txn(self, producer_id: int, *records: Record, epoch: int = 0) -> None:
        """A transactional batch of ``producer_id`` (what a TxnOffsetCommit will append)."""
        asyncio.run(self.log.append_transactional("txn", producer_id, epoch, list(records)))
        replay_transaction_entry(self.shard, TransactionalRecords(producer_id, epoch, list(records)))

    def txn_commit(self, producer_id: int, group: str, offsets: dict[tuple[str, int], int]) -> None:
        self.txn(
            producer_id,
            *(commit_record(group, t, p, o, self.clock.now_ms()) for (t, p), o in offsets.items()),
        )

    def marker(self, producer_id: int, committed: bool, epoch: int = 0) -> None:
        """The transaction coordinator ends ``producer_id``'s transaction."""
        self.log.write_marker(producer_id, epoch, committed)
        self.shard.replay_end_transaction_marker(producer_id, epoch, committed)

    def plain(self, *records: Record) -> None:
        self.apply(Result(records=list(records)))

    def loaded(self, *, compacted: bool = False, prefix: int | None = None) -> GroupCoordinatorShard:
        """A fresh shard that replayed what the log reads (``prefix``: only its first entries)."""
        log = MemoryShardLog(compacted_reads=compacted)
        log.entries = list(self.log.entries[:prefix])
        return load(
            log, GroupCoordinatorShard(self.config, self.clock)
        )  # the context's clock: it may serve on

    def stable_fetch(
        self, group: str, topics: dict[str, list[int]] | None, version: int = 7
    ) -> dict[Any, Any]:
        """(topic, partition) -> (offset, error) of an OffsetFetch with RequireStable."""
        if version >= 8:
            G = m.OffsetFetchRequest.OffsetFetchRequestGroup
            T = m.OffsetFetchRequest.OffsetFetchRequestTopics
            request = m.OffsetFetchRequest(require_stable=True, groups=[G(group_id=group, topics=None if topics is None else [
                T(name=t, partition_indexes=ps) for t, ps in topics.items()])])  # fmt: skip
        else:
            T7 = m.OffsetFetchRequest.OffsetFetchRequestTopic
            request = m.OffsetFetchRequest(require_stable=True, group_id=group, topics=None if topics is None else [
                T7(name=t, partition_indexes=ps) for t, ps in topics.items()])  # fmt: skip
        response = self.reply(self.send(ApiKey.OFFSET_FETCH, version, request))
        tops = response.groups[0].topics if version >= 8 else response.topics
        return {
            (t.name, p.partition_index): (p.committed_offset, p.error_code)
            for t in tops
            for p in t.partitions
        }


def load(log: MemoryShardLog, shard: GroupCoordinatorShard) -> GroupCoordinatorShard:
    async def read() -> None:
        async for entry in log.read():
            if type(entry) is list:
                for record in entry:
                    shard.replay(record)
            else:
                assert isinstance(entry, TransactionalRecords | EndTxnMarker)
                replay_transaction_entry(shard, entry)

    asyncio.run(read())
    return shard


def offsets_of(shard: GroupCoordinatorShard) -> dict[str, Any]:
    view = shard.durable_view()
    return {"offsets": view["offsets"], "pending": view["pending_offsets"]}


def check_loads(c: TxnContext) -> None:
    """Loading the log whole rebuilds the live state; loading it compacted rebuilds its offsets
    (a "simple" group whose only commits the cleaner removed is gone after compaction, as in Kafka)."""
    live = c.shard.durable_view()
    assert c.loaded().durable_view() == live
    assert offsets_of(c.loaded(compacted=True)) == offsets_of(c.shard)


# -- commit and abort ------------------------------------------------------------------------------
def test_a_committed_transaction_makes_its_offsets_visible_at_its_marker() -> None:
    c = TxnContext()
    c.commit("g", {("t", 0): 5})
    c.txn_commit(7, "g", {("t", 0): 10, ("t", 1): 11})
    assert c.fetched("g", {"t": [0, 1]}) == {("t", 0): 5, ("t", 1): -1}  # pending: not visible
    assert set(c.shard.durable_view()["pending_offsets"][7]["g"]["t"]) == {0, 1}
    check_loads(c)
    c.marker(7, committed=True)
    assert c.fetched("g", {"t": [0, 1]}) == {("t", 0): 10, ("t", 1): 11}
    assert c.shard.durable_view()["pending_offsets"] == {}
    check_loads(c)


def test_an_aborted_transaction_never_shows() -> None:
    c = TxnContext()
    c.commit("g", {("t", 0): 5})
    c.txn_commit(7, "g", {("t", 0): 10, ("t", 1): 11})
    c.marker(7, committed=False)
    assert c.fetched("g", {"t": [0, 1]}) == {("t", 0): 5, ("t", 1): -1}
    assert c.shard.durable_view()["pending_offsets"] == {}
    check_loads(c)
    c.marker(7, committed=True)  # a marker with nothing pending changes nothing
    assert c.fetched("g", {"t": [0, 1]}) == {("t", 0): 5, ("t", 1): -1}


def test_a_transactional_commit_creates_the_simple_group_as_a_plain_one_does() -> None:
    c = TxnContext()
    c.txn_commit(7, "new", {("t", 0): 1})
    group = c.group("new")
    assert group is not None and group.state_name == "Empty"
    check_loads(c)


def test_only_the_markers_producer_id_ends_its_transaction() -> None:
    c = TxnContext()
    c.txn_commit(7, "g", {("t", 0): 1})
    c.txn_commit(8, "g", {("t", 1): 2})
    c.marker(8, committed=True)
    assert c.fetched("g", {"t": [0, 1]}) == {("t", 0): -1, ("t", 1): 2}
    assert list(c.shard.durable_view()["pending_offsets"]) == [7]
    c.marker(9, committed=True)  # another producer's marker
    assert list(c.shard.durable_view()["pending_offsets"]) == [7]
    check_loads(c)


# -- log order between transactional and plain commits (Kafka's replayEndTransactionMarker) ---------
def test_a_plain_commit_written_after_the_transactional_one_wins() -> None:
    c = TxnContext()
    c.txn_commit(7, "g", {("t", 0): 10})
    c.commit("g", {("t", 0): 20})  # written after the pending offset
    c.marker(7, committed=True)
    assert c.fetched("g", {"t": [0]}) == {("t", 0): 20}
    check_loads(c)


def test_a_transactional_commit_written_after_the_plain_one_wins() -> None:
    c = TxnContext()
    c.commit("g", {("t", 0): 20})
    c.txn_commit(7, "g", {("t", 0): 10})
    c.marker(7, committed=True)
    assert c.fetched("g", {"t": [0]}) == {("t", 0): 10}
    check_loads(c)


def test_interleaved_producers_resolve_by_log_order() -> None:
    c = TxnContext()
    c.txn_commit(1, "g", {("t", 0): 1})
    c.txn_commit(2, "g", {("t", 0): 2, ("t", 1): 2})
    c.txn_commit(1, "g", {("t", 1): 1})  # producer 1 writes t-1 after producer 2 did
    c.marker(1, committed=True)
    assert c.fetched("g", {"t": [0, 1]}) == {("t", 0): 1, ("t", 1): 1}
    c.marker(2, committed=True)
    # t-0: producer 2's offset is newer than producer 1's; t-1: it is older, so it is skipped.
    assert c.fetched("g", {"t": [0, 1]}) == {("t", 0): 2, ("t", 1): 1}
    check_loads(c)


def test_interleaved_producers_one_aborted() -> None:
    c = TxnContext()
    c.txn_commit(1, "g", {("t", 0): 1})
    c.txn_commit(2, "g", {("t", 0): 2})
    c.marker(2, committed=False)
    c.marker(1, committed=True)
    assert c.fetched("g", {"t": [0]}) == {("t", 0): 1}
    check_loads(c)


# -- OffsetFetch RequireStable ---------------------------------------------------------------------
def test_require_stable_answers_unstable_for_partitions_with_a_pending_offset() -> None:
    c = TxnContext()
    c.commit("g", {("t", 0): 5, ("t", 1): 6})
    c.txn_commit(7, "g", {("t", 0): 10, ("t", 2): 12})
    for version in (7, 8, 9):
        assert c.stable_fetch("g", {"t": [0, 1, 2, 3]}, version) == {
            ("t", 0): (-1, UNSTABLE),
            ("t", 1): (6, 0),
            ("t", 2): (-1, UNSTABLE),  # pending, no committed offset: unstable too
            ("t", 3): (-1, 0),
        }
        # All partitions: only those with a committed offset are listed (Kafka's fetchAllOffsets).
        assert c.stable_fetch("g", None, version) == {("t", 0): (-1, UNSTABLE), ("t", 1): (6, 0)}
    # Without RequireStable the committed offsets are answered.
    assert c.fetched("g", {"t": [0, 1, 2]}) == {("t", 0): 5, ("t", 1): 6, ("t", 2): -1}
    c.marker(7, committed=True)
    assert c.stable_fetch("g", {"t": [0, 1, 2]}) == {("t", 0): (10, 0), ("t", 1): (6, 0), ("t", 2): (12, 0)}


def test_require_stable_of_another_group_is_not_held_up() -> None:
    c = TxnContext()
    c.commit("h", {("t", 0): 5})
    c.txn_commit(7, "g", {("t", 0): 10})
    assert c.stable_fetch("h", {"t": [0]}) == {("t", 0): (5, 0)}


def test_require_stable_before_v7_cannot_be_asked() -> None:
    c = TxnContext()
    c.commit("g", {("t", 0): 5})
    c.txn_commit(7, "g", {("t", 0): 10})
    assert c.fetched("g", {"t": [0]}, version=6) == {("t", 0): 5}


# -- a transaction open at load -------------------------------------------------------------------
async def test_a_transaction_open_at_load_stays_pending_until_its_marker() -> None:
    log = MemoryShardLog()
    clock = ManualClock(1_700_000_000_000)

    def runtime() -> ShardRuntime:
        return ShardRuntime(0, lambda: GroupCoordinatorShard(GroupConfig(), clock), log, clock)

    await log.append([commit_record("g", "t", 0, 5)])
    await log.append_transactional("txn", 7, 0, [commit_record("g", "t", 0, 10)])
    rt = runtime()
    await rt.load()
    R = m.OffsetFetchRequest
    request = R(
        group_id="g", require_stable=True, topics=[R.OffsetFetchRequestTopic(name="t", partition_indexes=[0])]
    )
    resp = await rt.submit(ApiKey.OFFSET_FETCH, RequestContext(7), request)
    assert [(p.committed_offset, p.error_code) for t in resp.topics for p in t.partitions] == [(-1, UNSTABLE)]
    log.write_marker(7, 0, committed=True)
    rt = runtime()
    await rt.load()
    resp = await rt.submit(ApiKey.OFFSET_FETCH, RequestContext(7), request)
    assert [(p.committed_offset, p.error_code) for t in resp.topics for p in t.partitions] == [(10, 0)]
    rt.close()


# -- tombstones, deletion, retention ----------------------------------------------------------------
def test_offset_delete_tombstones_a_partition_with_only_a_pending_offset_and_drops_it() -> None:
    c = TxnContext()
    c.commit("g", {("t", 0): 5})
    c.txn_commit(7, "g", {("t", 1): 10})
    c.offset_delete("g", {"t": [1, 2]})
    assert c.last_records == [offset_tombstone("g", "t", 1)]  # t-2 has nothing: no tombstone
    assert c.shard.durable_view()["pending_offsets"] == {}
    c.marker(7, committed=True)
    assert c.fetched("g", {"t": [0, 1]}) == {("t", 0): 5, ("t", 1): -1}
    check_loads(c)


def test_a_tombstone_drops_the_pending_offsets_of_every_producer() -> None:
    c = TxnContext()
    c.txn_commit(1, "g", {("t", 0): 1, ("t", 1): 1})
    c.txn_commit(2, "g", {("t", 0): 2})
    c.plain(offset_tombstone("g", "t", 0))
    assert c.shard.durable_view()["pending_offsets"] == {
        1: {"g": {"t": {1: c.shard.offsets.pending.by_producer[1][("g", "t", 1)][0].to_dict()}}}
    }
    c.marker(1, committed=True)
    c.marker(2, committed=True)
    assert c.fetched("g", {"t": [0, 1]}) == {("t", 0): -1, ("t", 1): 1}
    check_loads(c)


def test_delete_groups_tombstones_committed_and_pending_only_partitions_once_each() -> None:
    c = TxnContext()
    c.commit("g", {("t", 0): 5})
    c.txn_commit(7, "g", {("t", 0): 6, ("t", 1): 10})
    response = c.delete_groups("g")
    assert [r.error_code for r in response.results] == [0]
    tombstones = [r for r in c.last_records if r.value is None and hasattr(r.key, "topic")]
    assert sorted((r.key.topic, r.key.partition) for r in tombstones) == [("t", 0), ("t", 1)]
    assert c.shard.durable_view()["pending_offsets"] == {}
    c.marker(7, committed=True)
    assert c.shard.durable_view()["offsets"] == {}
    check_loads(c)


def test_retention_keeps_an_offset_and_its_group_while_a_transaction_is_pending() -> None:
    cfg = GroupConfig(offsets_retention_ms=DAY, offsets_retention_check_interval_ms=600_000)
    c = TxnContext(cfg)
    c.commit("g", {("t", 0): 5, ("t", 1): 6})
    c.txn_commit(7, "g", {("t", 0): 10})
    c.sleep(DAY + 600_000)
    # t-1 expired; t-0 has a pending offset: kept, and so is the (Empty) group.
    assert c.shard.offsets.store.view() == {"g": {"t": {0: c.shard.offsets.store.get("g", "t", 0).to_dict()}}}
    assert c.group("g") is not None
    c.marker(7, committed=False)
    c.sleep(600_000)
    assert c.shard.offsets.store.view() == {} and c.group("g") is None


def test_retention_keeps_a_group_with_only_pending_offsets() -> None:
    cfg = GroupConfig(offsets_retention_ms=DAY, offsets_retention_check_interval_ms=600_000)
    c = TxnContext(cfg)
    c.txn_commit(7, "g", {("t", 0): 10})
    c.sleep(2 * DAY)
    assert c.group("g") is not None
    c.marker(7, committed=True)
    assert c.fetched("g", {"t": [0]}) == {("t", 0): 10}


# -- compaction and reloads in the middle ----------------------------------------------------------
def test_compaction_below_an_open_transaction_keeps_the_tombstone_that_drops_it() -> None:
    """The cleaner does not go past the last stable offset: a tombstone written after an open
    transaction's offset stays, so the load drops the pending offset as the live shard did."""
    c = TxnContext()
    c.commit("g", {("t", 0): 5})
    c.txn_commit(7, "g", {("t", 0): 10})
    c.plain(offset_tombstone("g", "t", 0))
    assert offsets_of(c.shard) == {"offsets": {}, "pending": {}}
    compacted = MemoryShardLog(compacted_reads=True)
    compacted.entries = list(c.log.entries)
    assert [type(e).__name__ for e in compacted._compacted()] == ["tuple", "TxnBatch", "tuple"]
    check_loads(c)


def test_compaction_drops_aborted_data_and_superseded_committed_transactions() -> None:
    c = TxnContext()
    c.txn_commit(1, "g", {("t", 0): 1})
    c.marker(1, committed=False)
    c.txn_commit(2, "g", {("t", 1): 2})
    c.commit("g", {("t", 1): 3})
    c.marker(2, committed=True)  # t-1: the plain commit is newer
    c.txn_commit(3, "g", {("t", 2): 4})
    c.marker(3, committed=True)
    compacted = MemoryShardLog(compacted_reads=True)
    compacted.entries = list(c.log.entries)
    kept = compacted._compacted()
    assert [type(e).__name__ for e in kept] == ["tuple", "TxnBatch", "EndTxnMarker"]
    assert isinstance(kept[1], TxnBatch) and kept[1].producer_id == 3
    check_loads(c)


def random_history(seed: int, steps: int = 60) -> TxnContext:
    """Plain commits, tombstones, transactional commits of three producers and their markers, at random."""
    rng = random.Random(seed)
    c = TxnContext()
    keys = [("t", p) for p in range(3)]
    open_producers: set[int] = set()
    c.snapshots = {len(c.log.entries): c.shard.durable_view()}
    for n in range(steps):
        op = rng.random()
        topic, partition = rng.choice(keys)
        if op < 0.3:
            c.commit("g", {(topic, partition): n})
        elif op < 0.4:
            c.plain(offset_tombstone("g", topic, partition))
        elif op < 0.75:
            producer = rng.choice([1, 2, 3])
            c.txn_commit(producer, "g", {(topic, partition): 1000 + n})
            open_producers.add(producer)
        elif open_producers:
            producer = rng.choice(sorted(open_producers))
            c.marker(producer, committed=rng.random() < 0.6)
            open_producers.discard(producer)
        c.snapshots[len(c.log.entries)] = c.shard.durable_view()
    return c


def test_random_histories_load_the_same_whole_compacted_and_after_a_reload_in_the_middle() -> None:
    for seed in range(40):
        c = random_history(seed)
        live = c.shard.durable_view()
        assert c.loaded().durable_view() == live, seed
        assert offsets_of(c.loaded(compacted=True)) == offsets_of(c.shard), seed
        for cut, view in c.snapshots.items():  # a load of every prefix is the live state at that point
            assert c.loaded(prefix=cut).durable_view() == view, (seed, cut)
        entries = c.log.entries
        for cut in range(0, len(entries) + 1, 7):
            # kill at ``cut`` and reload: from the whole prefix or its compacted form; then the rest
            # of the log arrives and is replayed live: the state must end where the live shard did.
            for compacted in (False, True):
                shard = c.loaded(prefix=cut, compacted=compacted)
                rest = MemoryShardLog()
                rest.entries = list(entries[cut:])
                load(rest, shard)
                assert offsets_of(shard) == offsets_of(c.shard), (seed, cut, compacted)


# -- consumer groups (KIP-848) ---------------------------------------------------------------------
def test_a_consumer_groups_pending_offsets_keep_it_from_expiring_and_make_no_simple_group() -> None:
    cfg = GroupConfig(offsets_retention_ms=DAY, offsets_retention_check_interval_ms=600_000,
                      consumer_assignment_interval_ms=0)  # fmt: skip
    log = ConsumerLog("cg", cfg)
    log.bump_group_epoch(1)  # an Empty consumer group, subscribed to nothing
    log.shard.replay(commit_record("cg", "gone", 0, 5), producer_id=7, producer_epoch=0)
    assert "cg" not in log.shard.classic.groups
    log.sleep(2 * DAY)
    assert log.shard.consumer.get("cg") is not None  # a pending offset: not deleted
    log.shard.replay_end_transaction_marker(7, 0, committed=True)
    assert log.shard.offsets.store.get("cg", "gone", 0).offset == 5
    log.sleep(600_000)  # committed long ago (timestamp 1): expires, and the Empty group goes with it
    assert log.shard.consumer.get("cg") is None and log.shard.offsets.store.view() == {}


# -- random sequences (Hypothesis) -------------------------------------------------------------------
class TxnShardMachine(RuleBasedStateMachine):
    """Simple commits, OffsetDelete, DeleteGroups and retention through the handlers, interleaved with
    clients' transactional commits and their markers, and crashes that reload the shard from its log."""

    def __init__(self) -> None:
        super().__init__()
        self.c = TxnContext(
            GroupConfig(offsets_retention_ms=DAY, offsets_retention_check_interval_ms=600_000)
        )
        self.open: set[int] = set()

    @rule(group=st.sampled_from(["g", "h"]), partition=st.integers(0, 2), offset=st.integers(0, 100))
    def commit(self, group: str, partition: int, offset: int) -> None:
        self.c.commit(group, {("t", partition): offset})

    @rule(
        producer=st.integers(1, 3),
        group=st.sampled_from(["g", "h"]),
        partitions=st.sets(st.integers(0, 2), min_size=1),
    )
    def txn_commit(self, producer: int, group: str, partitions: set[int]) -> None:
        self.c.txn_commit(producer, group, {("t", p): 1000 + p for p in partitions})
        self.open.add(producer)

    @rule(producer=st.integers(1, 3), committed=st.booleans())
    def marker(self, producer: int, committed: bool) -> None:
        self.c.marker(producer, committed)
        self.open.discard(producer)

    @rule(group=st.sampled_from(["g", "h"]), partition=st.integers(0, 2))
    def offset_delete(self, group: str, partition: int) -> None:
        self.c.offset_delete(group, {"t": [partition]})

    @rule(group=st.sampled_from(["g", "h"]))
    def delete_group(self, group: str) -> None:
        self.c.delete_groups(group)

    @rule(ms=st.sampled_from([600_000, DAY]))
    def sleep(self, ms: int) -> None:
        self.c.sleep(ms)

    @rule(compacted=st.booleans())
    def crash_and_reload(self, compacted: bool) -> None:
        self.c.shard = self.c.loaded(compacted=compacted)
        self.c.apply(self.c.shard.on_loaded())

    @invariant()
    def loading_the_log_rebuilds_the_state(self) -> None:
        assert offsets_of(self.c.loaded()) == offsets_of(self.c.shard)
        assert offsets_of(self.c.loaded(compacted=True)) == offsets_of(self.c.shard)

    @invariant()
    def require_stable_is_unstable_exactly_where_an_offset_is_pending(self) -> None:
        pending = self.c.shard.offsets.pending.by_producer
        assert set(pending) <= self.open
        for group in ("g", "h"):
            expected = {(g, t, p) for offsets in pending.values() for (g, t, p) in offsets if g == group}
            answered = self.c.stable_fetch(group, {"t": [0, 1, 2]}, version=8)
            assert {(group, t, p) for (t, p), (_, code) in answered.items() if code == UNSTABLE} == expected


TxnShardMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestTxnShard = TxnShardMachine.TestCase
