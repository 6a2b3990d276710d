"""The asyncio shard runtime: replies wait for the log, appends are batched, failures reload.

These drive the real group state (GroupCoordinatorShard) over the in-memory log, whose appends a
test can hold open or make fail, to check docs/architecture.md rule 3: a response that depends on
new state is sent only after the records behind it are acknowledged.
"""

from __future__ import annotations

import asyncio

from kcoord.coordinator.core.clock import SystemClock
from kcoord.coordinator.core.group_config import GroupConfig
from kcoord.coordinator.core.result import RequestContext
from kcoord.coordinator.core.shard_state import GroupCoordinatorShard
from kcoord.coordinator.runtime.shard import ShardRuntime
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey
from kcoord.storage.base import StorageError
from kcoord.storage.memory import MemoryShardLog


class GatedLog(MemoryShardLog):
    """An in-memory log whose appends block until the test opens the gate."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.batches: list[int] = []

    async def append(self, records):  # type: ignore[no-untyped-def]
        await self.gate.wait()
        self.batches.append(len(records))
        await super().append(records)


class HeldLog(MemoryShardLog):
    """A log whose appends land in the order they were sent, each answered when the test says:
    acknowledged, in any order, or failed (the outcome of a failed one is unknown to the shard;
    here it landed, as a batch whose answer timed out)."""

    def __init__(self) -> None:
        super().__init__()
        self.held: list[asyncio.Future[None]] = []
        self.sent: list[int] = []  # records per append, in send order

    async def append(self, records):  # type: ignore[no-untyped-def]
        answer: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.held.append(answer)
        self.sent.append(len(records))
        self.entries.extend(self._encode(records))
        await answer

    def ack(self, i: int) -> None:
        self.held[i].set_result(None)

    def fail(self, i: int) -> None:
        self.held[i].set_exception(StorageError("timed out"))


def make_runtime(
    log: MemoryShardLog, config: GroupConfig | None = None, max_in_flight: int = 1
) -> ShardRuntime:
    clock = SystemClock()
    cfg = config or GroupConfig()
    return ShardRuntime(
        0, lambda: GroupCoordinatorShard(cfg, clock, shard_index=0), log, clock, max_in_flight=max_in_flight
    )


def commit_request(group: str, partition: int, offset: int) -> m.OffsetCommitRequest:
    R = m.OffsetCommitRequest
    return R(
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[
            R.OffsetCommitRequestTopic(
                name="t",
                partitions=[
                    R.OffsetCommitRequestPartition(partition_index=partition, committed_offset=offset)
                ],
            )
        ],
    )


def fetch_request(group: str) -> m.OffsetFetchRequest:
    R = m.OffsetFetchRequest
    return R(group_id=group, topics=[R.OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1, 2])])


def committed(resp: m.OffsetFetchResponse) -> dict[int, int]:
    return {p.partition_index: p.committed_offset for t in resp.topics for p in t.partitions}


def commit_errors(resp: m.OffsetCommitResponse) -> list[int]:
    return [p.error_code for t in resp.topics for p in t.partitions]


async def test_commit_reply_waits_for_the_log() -> None:
    log = GatedLog()
    rt = make_runtime(log)
    await rt.load()
    fut = rt.submit(ApiKey.OFFSET_COMMIT, RequestContext(8), commit_request("g", 0, 10))
    await asyncio.sleep(0.05)
    assert not fut.done()  # not acknowledged yet: no reply
    # A read issued after the write also waits: it may reveal the unacknowledged offset.
    read = rt.submit(ApiKey.OFFSET_FETCH, RequestContext(6), fetch_request("g"))
    await asyncio.sleep(0.01)
    assert not read.done()
    log.gate.set()
    assert commit_errors(await fut) == [0]
    assert committed(await read)[0] == 10


async def test_concurrent_commits_share_appends() -> None:
    log = GatedLog()
    rt = make_runtime(log)
    await rt.load()
    futs = [
        rt.submit(ApiKey.OFFSET_COMMIT, RequestContext(8), commit_request(f"g{i}", 0, i)) for i in range(200)
    ]
    await asyncio.sleep(0.01)
    log.gate.set()
    results = await asyncio.gather(*futs)
    assert all(commit_errors(r) == [0] for r in results)
    assert sum(log.batches) == 200
    assert len(log.batches) <= 2  # group commit: one append, or one plus the stragglers


async def test_the_replies_an_append_released_are_handed_out_then_after_replies_runs() -> None:
    """The server writes released answers in ``after_replies`` (net/writes.py's write_now): it must
    come after every reply of the append was delivered, once per append that released any."""
    log = GatedLog()
    rt = make_runtime(log)
    await rt.load()
    seen: list[str] = []
    rt.after_replies = lambda: seen.append("written")
    for i in range(3):
        rt.submit_with(ApiKey.OFFSET_COMMIT, RequestContext(8), commit_request("g", i, 7),
                       lambda response, i=i: seen.append(f"reply {i}"))  # fmt: skip
    await asyncio.sleep(0.01)
    assert seen == []  # nothing acknowledged, nothing released
    log.gate.set()
    for _ in range(100):
        if "written" in seen:
            break
        await asyncio.sleep(0.001)
    assert seen == ["reply 0", "reply 1", "reply 2", "written"]
    # A reply that needs no append is delivered at once and calls nothing.
    rt.submit_with(ApiKey.OFFSET_FETCH, RequestContext(6), fetch_request("g"), lambda _: seen.append("read"))
    assert seen[-1] == "read"


async def test_failed_append_answers_not_coordinator_and_reloads() -> None:
    log = MemoryShardLog()
    rt = make_runtime(log)
    await rt.load()
    assert commit_errors(
        await rt.submit(ApiKey.OFFSET_COMMIT, RequestContext(8), commit_request("g", 0, 5))
    ) == [0]
    log.fail_next_appends = 1
    failed = await rt.submit(ApiKey.OFFSET_COMMIT, RequestContext(8), commit_request("g", 0, 99))
    assert commit_errors(failed) == [ErrorCode.NOT_COORDINATOR]
    for _ in range(100):
        if rt.loaded:
            break
        await asyncio.sleep(0.01)
    assert rt.loaded
    # The reloaded shard serves only what the log holds: the failed commit is not visible.
    assert committed(await rt.submit(ApiKey.OFFSET_FETCH, RequestContext(6), fetch_request("g")))[0] == 5


async def test_requests_before_load_get_load_in_progress() -> None:
    rt = make_runtime(MemoryShardLog())
    resp = await rt.submit(ApiKey.OFFSET_COMMIT, RequestContext(8), commit_request("g", 0, 1))
    assert commit_errors(resp) == [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS]


async def test_a_heartbeat_before_load_is_answered_none_as_kafka_does() -> None:
    """Kafka answers a classic Heartbeat NONE while the group loads; clients (aiokafka) fail on
    COORDINATOR_LOAD_IN_PROGRESS there. JoinGroup still gets the loading error and retries."""
    rt = make_runtime(MemoryShardLog())
    beat = m.HeartbeatRequest(group_id="g", generation_id=3, member_id="m-1")
    assert (await rt.submit(ApiKey.HEARTBEAT, RequestContext(4), beat)).error_code == ErrorCode.NONE
    join = m.JoinGroupRequest(group_id="g", session_timeout_ms=10_000, member_id="", protocol_type="consumer")
    answer = await rt.submit(ApiKey.JOIN_GROUP, RequestContext(9), join)
    assert answer.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


async def test_reload_from_log_rebuilds_offsets() -> None:
    log = MemoryShardLog()
    rt = make_runtime(log)
    await rt.load()
    for p in range(3):
        await rt.submit(ApiKey.OFFSET_COMMIT, RequestContext(8), commit_request("g", p, 100 + p))
    fresh = make_runtime(log)
    await fresh.load()
    resp = await fresh.submit(ApiKey.OFFSET_FETCH, RequestContext(6), fetch_request("g"))
    assert committed(resp) == {0: 100, 1: 101, 2: 102}


async def test_session_timeout_fires_on_the_event_loop() -> None:
    """Timers run through the same write path: a silent member is expired by the runtime's timer."""
    cfg = GroupConfig(min_session_timeout_ms=50, initial_rebalance_delay_ms=0)
    rt = make_runtime(MemoryShardLog(), cfg)
    await rt.load()
    J = m.JoinGroupRequest
    join = J(
        group_id="g",
        session_timeout_ms=100,
        rebalance_timeout_ms=100,
        member_id="",
        protocol_type="consumer",
        protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"")],
    )
    first = await rt.submit(ApiKey.JOIN_GROUP, RequestContext(3), join)  # v3: joins at once
    assert first.error_code == 0
    sync = m.SyncGroupRequest(
        group_id="g", generation_id=first.generation_id, member_id=first.member_id, assignments=[]
    )
    assert (await rt.submit(ApiKey.SYNC_GROUP, RequestContext(3), sync)).error_code == 0
    await asyncio.sleep(0.4)  # no heartbeats: the session times out
    hb = m.HeartbeatRequest(group_id="g", generation_id=first.generation_id, member_id=first.member_id)
    resp = await rt.submit(ApiKey.HEARTBEAT, RequestContext(3), hb)
    assert resp.error_code == ErrorCode.UNKNOWN_MEMBER_ID


async def test_a_log_fenced_between_appends_stops_the_shard_for_good() -> None:
    """ShardLog.on_lost(FencedError): another kcoord owns the shard; nothing is served from memory."""
    from kcoord.storage.base import FencedError

    log = MemoryShardLog()
    rt = make_runtime(log)
    await rt.load()
    assert commit_errors(
        await rt.submit(ApiKey.OFFSET_COMMIT, RequestContext(8), commit_request("g", 0, 10))
    ) == [0]
    held = GatedLog()  # a commit whose append is in flight when the fence is found
    rt.log = held
    pending = rt.submit(ApiKey.OFFSET_COMMIT, RequestContext(8), commit_request("g", 0, 11))
    await asyncio.sleep(0.01)
    assert log.on_lost is not None
    log.on_lost(FencedError("another kcoord took over"))
    assert commit_errors(await pending) == [ErrorCode.NOT_COORDINATOR]
    read = await rt.submit(ApiKey.OFFSET_FETCH, RequestContext(6), fetch_request("g"))
    assert read.error_code == ErrorCode.NOT_COORDINATOR
    held.gate.set()
    await asyncio.sleep(0.05)
    assert rt.fenced and not rt.loaded  # and it stays so: no reload


async def test_a_lost_log_stops_the_shard_and_reloads_it() -> None:
    """ShardLog.on_lost(LogLostError): the shard answers from nothing it loaded before; it reloads
    from what the log holds now and serves again."""
    from kcoord.storage.base import LogLostError

    log = MemoryShardLog()
    rt = make_runtime(log)
    await rt.load()
    assert commit_errors(
        await rt.submit(ApiKey.OFFSET_COMMIT, RequestContext(8), commit_request("g", 0, 10))
    ) == [0]
    log.entries.clear()  # the topic was deleted and re-created upstream
    assert log.on_lost is not None
    log.on_lost(LogLostError("the topic was re-created"))
    assert not rt.loaded and rt.lost == "the topic was re-created"
    answer = await rt.submit(ApiKey.OFFSET_FETCH, RequestContext(6), fetch_request("g"))
    assert answer.error_code in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR)
    for _ in range(100):
        if rt.loaded:
            break
        await asyncio.sleep(0.01)
    assert rt.loaded and rt.lost is None and not rt.fenced
    assert committed(await rt.submit(ApiKey.OFFSET_FETCH, RequestContext(6), fetch_request("g"))) == {
        0: -1,
        1: -1,
        2: -1,
    }  # what the log holds now, not the 10 this process remembered
    log.on_lost(LogLostError("again"))
    log.on_lost(LogLostError("and again"))  # one reload at a time
    for _ in range(100):
        if rt.loaded:
            break
        await asyncio.sleep(0.01)
    assert rt.loaded


async def test_a_shard_that_cannot_load_at_start_retries_in_the_background() -> None:
    """One shard whose log cannot be read at start (an upstream that refuses its fence write, say)
    must not stop the process: it answers LOAD_IN_PROGRESS and loads once the log is readable."""
    from kcoord.storage.base import StorageError

    class FlakyReadLog(MemoryShardLog):
        failures = 1

        async def read(self):  # type: ignore[no-untyped-def,override]
            if self.failures:
                self.failures -= 1
                raise StorageError("append to t[0] rejected: error -1")
            async for batch in super().read():
                yield batch

    rt = make_runtime(FlakyReadLog())
    await rt.first_load()
    assert not rt.loaded and not rt.fenced
    answer = await rt.submit(ApiKey.OFFSET_FETCH, RequestContext(6), fetch_request("g"))
    assert answer.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    for _ in range(200):
        if rt.loaded:
            break
        await asyncio.sleep(0.01)
    assert rt.loaded
    rt.close()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def commits_one_by_one(rt: ShardRuntime, count: int) -> list[asyncio.Future[m.Message]]:
    """``count`` commits of group g (partition i at offset 10 + i), each in a loop iteration of its own."""
    futs = []
    for i in range(count):
        futs.append(rt.submit(ApiKey.OFFSET_COMMIT, RequestContext(8), commit_request("g", i, 10 + i)))
        await settle()
    return futs


async def test_appends_are_pipelined_up_to_the_cap() -> None:
    """A commit does not wait for the round trip of the append before it; beyond ``max_in_flight``
    appends the records gather and go out together once a slot frees."""
    log = HeldLog()
    rt = make_runtime(log, max_in_flight=2)
    await rt.load()
    futs = await commits_one_by_one(rt, 4)
    assert log.sent == [1, 1]  # two in flight; the third and fourth commits wait for a slot
    log.ack(0)
    await settle()
    assert log.sent == [1, 1, 2]  # together, in one append
    assert futs[0].done() and not any(f.done() for f in futs[1:])
    log.ack(1)
    log.ack(2)
    await settle()
    assert [commit_errors(await f) for f in futs] == [[0]] * 4
    assert committed(await rt.submit(ApiKey.OFFSET_FETCH, RequestContext(6), fetch_request("g"))) == {
        0: 10,
        1: 11,
        2: 12,
    }


async def test_a_later_append_acknowledged_first_waits_for_the_earlier_one() -> None:
    log = HeldLog()
    rt = make_runtime(log, max_in_flight=5)
    await rt.load()
    first = rt.submit(ApiKey.OFFSET_COMMIT, RequestContext(8), commit_request("g", 0, 10))
    await settle()
    second = rt.submit(ApiKey.OFFSET_COMMIT, RequestContext(8), commit_request("g", 1, 11))
    await settle()
    assert log.sent == [1, 1]
    log.ack(1)
    await settle()
    assert not first.done() and not second.done()  # the second's reply may reveal the first commit
    log.ack(0)
    await settle()
    assert commit_errors(await first) == [0] and commit_errors(await second) == [0]


async def test_a_failed_append_fails_every_later_one_in_flight_and_the_shard_reloads_the_log() -> None:
    """The later append's acknowledgement, earlier or later than the failure, tells its client
    nothing but NOT_COORDINATOR; the reloaded state is the log's (here both commits landed)."""
    log = HeldLog()
    rt = make_runtime(log, max_in_flight=5)
    await rt.load()
    futs = await commits_one_by_one(rt, 3)
    assert log.sent == [1, 1, 1]
    log.ack(1)
    await settle()
    log.fail(0)
    await settle()
    log.ack(2)
    assert [commit_errors(await f) for f in futs] == [[ErrorCode.NOT_COORDINATOR]] * 3
    for _ in range(100):
        if rt.loaded:
            break
        await asyncio.sleep(0.01)
    assert rt.loaded
    assert committed(await rt.submit(ApiKey.OFFSET_FETCH, RequestContext(6), fetch_request("g"))) == {
        0: 10,
        1: 11,
        2: 12,
    }
    # And the shard writes again after the reload.
    again = rt.submit(ApiKey.OFFSET_COMMIT, RequestContext(8), commit_request("g", 0, 20))
    await settle()
    log.ack(len(log.held) - 1)
    assert commit_errors(await again) == [0]


async def test_replaying_the_pipelined_log_gives_the_same_state() -> None:
    log = HeldLog()
    rt = make_runtime(log, max_in_flight=3)
    await rt.load()
    futs = []
    for i in range(9):
        futs.append(rt.submit(ApiKey.OFFSET_COMMIT, RequestContext(8), commit_request("g", i % 3, 100 + i)))
        await settle()
        unanswered = [a for a in log.held if not a.done()]
        if len(unanswered) == 3:  # every slot taken: answer the newest first, the oldest next
            unanswered[-1].set_result(None)
            unanswered[0].set_result(None)
    for _ in range(20):
        for answer in log.held:
            if not answer.done():
                answer.set_result(None)
        await settle()
    assert all(commit_errors(f.result()) == [0] for f in futs)
    fetch = fetch_request("g")
    live = committed(await rt.submit(ApiKey.OFFSET_FETCH, RequestContext(6), fetch))
    replayed = make_runtime(MemoryShardLog())
    replayed.log.entries = list(log.entries)  # type: ignore[attr-defined]
    await replayed.load()
    assert (
        committed(await replayed.submit(ApiKey.OFFSET_FETCH, RequestContext(6), fetch))
        == live
        == {
            0: 106,
            1: 107,
            2: 108,
        }
    )
