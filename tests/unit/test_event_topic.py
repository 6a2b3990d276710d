"""The event topic writer without a cluster: schema v1 encoding, per-second commit sums, drops counted."""

from __future__ import annotations

import asyncio
import json
import logging
import time

import pytest
from prometheus_client import CollectorRegistry

from kcoord.coordinator.core import events as ev
from kcoord.coordinator.ops.event_topic import EventEncoder, EventTopicWriter
from kcoord.protocol import messages as m


def consumer_assignment(parts: dict[str, list[int]]) -> bytes:
    A = m.ConsumerProtocolAssignment
    body = A(assigned_partitions=[A.TopicPartition(topic=t, partitions=ps) for t, ps in parts.items()])
    return b"\x00\x01" + body.encode(1)


def test_leave_carries_the_client_id_and_host_of_the_join() -> None:
    enc = EventEncoder()
    joined = enc.encode(3, 10, ev.MemberJoined("g", "m1", "i1", "app", "/10.0.0.1", "consumer"))
    left = enc.encode(3, 20, ev.MemberLeft("g", "m1", "i1", "leave_group"))
    assert joined is not None and left is not None
    assert (joined["v"], joined["type"], joined["kind"]) == (1, "member_joined", "static")
    assert (left["client_id"], left["host"], left["reason"]) == ("app", "/10.0.0.1", "leave_group")
    assert ("g", "m1") not in enc.members


def test_classic_assignment_is_decoded_to_partitions() -> None:
    enc = EventEncoder()
    e = ev.AssignmentComputed(
        "g",
        4,
        "consumer",
        "range",
        (
            ev.MemberAssignment("m1", None, consumer_assignment({"t": [2, 0]})),
            ev.MemberAssignment("m2", None, b""),
        ),
    )
    doc = enc.encode(0, 1, e)
    assert doc is not None
    assert [a["partitions"] for a in doc["assignment"]] == [["t:0", "t:2"], []]
    assert json.loads(json.dumps(doc)) == doc


def test_a_kip848_reconciliation_is_an_event_with_its_epoch_and_duration() -> None:
    doc = EventEncoder().encode(2, 30, ev.ReconciliationCompleted("g", 7, 1234, 3))
    assert doc == {
        "v": 1,
        "ts": 30,
        "shard": 2,
        "type": "reconciliation_completed",
        "group": "g",
        "generation": 7,
        "duration_ms": 1234,
        "members": 3,
    }


def test_commits_summed_per_second_with_fenced_by_error() -> None:
    w = EventTopicWriter([("x", 1)], "ev", registry=CollectorRegistry())
    w.offer(
        1,
        [
            ev.OffsetsCommitted("g", 3),
            ev.OffsetsCommitted("g", 2),
            ev.MemberFenced("g", "z", None, "ILLEGAL_GENERATION", "offset_commit"),
            ev.CommitRejected("g", "z", "REBALANCE_IN_PROGRESS", "offset_commit"),
        ],
    )
    assert len(w.queue) == 1  # the member_fenced event itself
    w._flush_commits(everything=True)
    doc = w.queue[-1][2]
    assert (doc["type"], doc["count"], doc["requests"]) == ("commits", 5, 2)
    assert doc["fenced"] == {"ILLEGAL_GENERATION": 1} and doc["rejected"] == {"REBALANCE_IN_PROGRESS": 1}


def test_a_full_queue_drops_and_counts() -> None:
    registry = CollectorRegistry()
    w = EventTopicWriter([("x", 1)], "ev", queue_max=3, registry=registry)
    w.offer(0, [ev.GroupDeleted("g", "delete_groups")] * 5)
    assert len(w.queue) == 3 and w.dropped == 2
    assert registry.get_sample_value("kcoord_events_dropped_total", {"reason": "queue_full"}) == 2


def test_unreachable_cluster_never_blocks_and_close_drops_what_waits() -> None:
    async def scenario() -> EventTopicWriter:
        w = EventTopicWriter([("127.0.0.1", 1)], "ev", registry=CollectorRegistry(), request_timeout=0.5)
        await w.start()
        w.offer(0, [ev.GroupDeleted("g", "delete_groups")])
        await asyncio.sleep(0.05)
        await w.close(timeout=3.0)
        return w

    w = asyncio.run(scenario())
    assert w.written == 0 and w.dropped == 1 and not w.queue


def test_each_change_of_the_writers_state_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    from kcoord.coordinator.ops.event_topic import FAILING, TOPIC_MISSING, WRITING

    w = EventTopicWriter([("x", 1)], "ev", registry=CollectorRegistry())
    with caplog.at_level(logging.INFO, logger="kcoord.events.topic"):
        w._enter(WRITING)  # the first write: nothing to say
        for _ in range(3):
            w._enter(TOPIC_MISSING, "Produce error 3 on partition 0")
        for _ in range(3):
            w._enter(FAILING, "produce failed (Produce error -1)")
        w._enter(WRITING)
        w._enter(WRITING)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 3, said
    assert "gone upstream" in said[0] and "retrying" in said[1] and "writing again" in said[2]


def test_a_backlog_goes_out_in_produces_of_a_bounded_size() -> None:
    """Thousands of waiting events (a join storm, a cluster that was away) are produced a bounded
    number of bytes at a time: one partition's batch stays under Kafka's default max.message.bytes
    (1 MB), and each stretch of encoding on the event loop stays short. Events leave the queue only
    with the Produce that carried them."""
    from kcoord.coordinator.ops.event_topic import SEND_BYTES

    w = EventTopicWriter([("x", 1)], "ev", registry=CollectorRegistry())
    sent: list[int] = []

    async def produce(by_partition: dict[int, list[tuple[bytes, bytes]]]) -> None:
        sent.append(sum(len(k) + len(v) for pairs in by_partition.values() for k, v in pairs))
        assert len(w.queue) == 10_000 - sum(counts)  # nothing left the queue before its Produce

    counts: list[int] = []
    w._produce = produce  # type: ignore[method-assign]
    w.offer(0, [ev.GroupDeleted(f"group-{i:05d}", "delete_groups") for i in range(10_000)])
    assert len(w.queue) == 10_000

    async def drain() -> None:
        while w.queue:
            before = len(w.queue)
            await w._send(min(len(w.queue), w.batch * 4))
            counts.append(before - len(w.queue))

    asyncio.run(drain())
    assert w.written == 10_000 and sum(counts) == 10_000
    assert len(sent) > 1 and max(sent) < SEND_BYTES + 1024 < 1_000_000


def test_an_idle_writer_sleeps_until_an_event_comes_then_lingers() -> None:
    """Nothing waiting: the background task does not wake every ``linger`` (an idle kcoord's
    loop woke 5 times a second for it); the first event wakes it, and it still lingers so that
    the events behind it go out in the same Produce."""
    w = EventTopicWriter([("x", 1)], "ev", registry=CollectorRegistry(), linger=0.02)
    rounds: list[float] = []
    produced: list[int] = []

    async def ready() -> bool:
        return True

    async def missing() -> bool:  # called once per round of the background task
        rounds.append(time.monotonic())
        return False

    async def produce(by_partition: dict[int, list[tuple[bytes, bytes]]]) -> None:
        produced.append(sum(len(pairs) for pairs in by_partition.values()))

    w._ensure_topic = ready  # type: ignore[method-assign]
    w._topic_missing = missing  # type: ignore[method-assign]
    w._produce = produce  # type: ignore[method-assign]

    async def scenario() -> None:
        await w.start()
        await asyncio.sleep(0.3)  # 15 lingers' time with nothing to write
        assert rounds == [] and w._idle
        w.offer(0, [ev.GroupDeleted("g1", "delete_groups")])
        w.offer(0, [ev.GroupDeleted("g2", "delete_groups")])  # within the linger: the same Produce
        await asyncio.sleep(0.15)
        assert produced == [2] and w.written == 2 and w._idle
        assert len(rounds) == 1  # and asleep again since
        w.offer(0, [ev.OffsetsCommitted("g1", 3)])  # a commit sum wakes it too (its second ends)
        await asyncio.sleep(1.2)
        assert w.written == 3 and w._idle
        await w.close(timeout=1.0)

    asyncio.run(scenario())
