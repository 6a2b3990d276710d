"""The shards' periodic tail checks read every partition in one Fetch per leader.

Why it matters: a broker answers one connection's requests in order and the shards' appends share
the leader connection with these reads, so one Fetch per shard held the appends behind them for up
to ~100 ms every second on Kafka 4.0 (storage/ownership.py, ``tail_checks``). A fake cluster here
records the requests and answers them; the shards' classification of what they read is the real one.
"""

from __future__ import annotations

from typing import Any

from kcoord.protocol import storage_messages as sm
from kcoord.protocol.errors import ErrorCode
from kcoord.storage.base import StorageError
from kcoord.storage.ownership import Ownership, tail_checks
from kcoord.storage.partition import PartitionReads
from kcoord.storage.position import LogPosition

TOPIC = "__kcoord_offsets"


class FakeConn:
    def __init__(self, name: str, answer: dict[int, tuple[int, int]]) -> None:
        self.name = name
        self.answer = answer  # partition -> (error code, high watermark)
        self.requests: list[Any] = []

    async def request(self, body: Any, timeout: float) -> Any:
        self.requests.append(body)
        R = sm.FetchResponse
        wanted = [p.partition for t in body.topics for p in t.partitions]
        return R(
            responses=[
                R.FetchableTopicResponse(
                    topic=TOPIC,
                    partitions=[
                        R.PartitionData(
                            partition_index=p,
                            error_code=self.answer[p][0],
                            high_watermark=self.answer[p][1],
                            log_start_offset=0,
                            records=b"",
                        )
                        for p in wanted
                        if p in self.answer  # an idle partition left out, as tansu does
                    ],
                )
            ]
        )


class FakeCluster:
    def __init__(self, leaders: dict[int, FakeConn | None]) -> None:
        self.leaders = leaders

    async def leader(self, partition: int) -> FakeConn:
        conn = self.leaders[partition]
        if conn is None:
            raise StorageError("no leader")
        return conn


def shard(cluster: FakeCluster, partition: int, checked: int) -> Ownership:
    position = LogPosition()
    position.checked = checked
    position.log_start = 0
    reads = PartitionReads(cluster, TOPIC, partition, 5.0, 1 << 20)  # type: ignore[arg-type]
    own = Ownership(cluster, TOPIC, partition, position, reads, init_timeout=5.0, request_timeout=5.0)  # type: ignore[arg-type]
    own.owned = True
    return own


async def test_every_shard_is_checked_in_one_fetch_per_leader_that_needs_no_data() -> None:
    a = FakeConn("a", {0: (0, 10), 1: (0, 20), 2: (0, 30)})
    b = FakeConn("b", {3: (0, 40)})
    cluster = FakeCluster({0: a, 1: a, 2: a, 3: b})
    shards = [shard(cluster, p, 10 * (p + 1)) for p in range(4)]
    await tail_checks(shards)
    assert len(a.requests) == 1 and len(b.requests) == 1
    (req,) = a.requests
    assert req.min_bytes == 0  # answered at once at the log's end, never parked for max_wait_ms
    assert {(p.partition, p.fetch_offset) for t in req.topics for p in t.partitions} == {
        (0, 10),
        (1, 20),
        (2, 30),
    }
    assert all(s.lost is None and s.fenced is None for s in shards)


async def test_each_shard_classifies_its_own_partition_and_failures_are_skipped() -> None:
    lost = []
    # partition 0: high watermark below what this process wrote (the topic was re-created): lost;
    # 1: offset out of range (records None): lost; 2: left out of the answer; 3: no leader.
    conn = FakeConn("a", {0: (0, 5), 1: (ErrorCode.OFFSET_OUT_OF_RANGE, 50)})
    cluster = FakeCluster({0: conn, 1: conn, 2: conn, 3: None})
    shards = [shard(cluster, p, 20) for p in range(4)]
    for s in shards:
        s.on_lost = lambda exc, p=s.partition: lost.append(p)  # type: ignore[misc]
    await tail_checks(shards)
    assert shards[0].lost is not None and shards[1].lost is not None
    assert shards[2].lost is None and shards[3].lost is None
    assert sorted(lost) == [0, 1]


async def test_a_shard_not_loaded_yet_is_not_asked_for() -> None:
    conn = FakeConn("a", {0: (0, 10), 1: (0, 10)})
    cluster = FakeCluster({0: conn, 1: conn})
    await tail_checks([shard(cluster, 0, -1), shard(cluster, 1, 10)])
    assert [[p.partition for t in r.topics for p in t.partitions] for r in conn.requests] == [[1]]
    await tail_checks([shard(cluster, 0, -1)])
    assert len(conn.requests) == 1  # nothing to check: no request


class BrokenConn(FakeConn):
    async def request(self, body: Any, timeout: float) -> Any:
        self.requests.append(body)
        raise RuntimeError("a bug in reading the answer")


async def test_a_failing_request_costs_only_its_own_partitions_their_check(caplog: Any) -> None:
    broken = BrokenConn("broken", {})
    good = FakeConn("good", {1: (0, 5)})
    cluster = FakeCluster({0: broken, 1: good})
    shards = [shard(cluster, 0, 20), shard(cluster, 1, 20)]
    await tail_checks(shards)  # does not raise: the periodic check lives on to its next round
    assert shards[0].lost is None  # no answer: nothing concluded
    assert shards[1].lost is not None  # its own leader answered: high watermark 5 below 20
    assert "tail checks failed" in caplog.text
