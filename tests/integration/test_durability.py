"""kcoord loses nothing a client was told is done (durable storage on the real cluster).

kcoord runs with ``--storage kafka`` against an upstream broker (tansu and Apache Kafka, each in turn) that outlives it; kcoord itself is
killed with SIGKILL — no shutdown, no flush — and restarted on the same port.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, OffsetAndMetadata, TopicPartition

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from support.java import JavaPeer, run_admin
from support.kcoord_process import KcoordProcess
from support.workload import create_topic, produce_numbered, unique, wait_until
from tests.support.fixtures import Upstream
from tests.support.wire import WireClient

pytestmark = pytest.mark.integration


def start_kcoord(upstream: Upstream, topic: str, port: int | None = None) -> KcoordProcess:
    return KcoordProcess(
        "--shards",
        "4",
        "--storage",
        "kafka",
        "--internal-topic",
        topic,
        bootstrap=upstream.bootstrap,
        port=port,
    ).start()


def internal_topic() -> str:
    return f"__kcoord_test_{uuid.uuid4().hex[:8]}"


class SimpleCommitter(threading.Thread):
    """kafka-python with assign() + commit(): generation -1 commits to a member-less group."""

    def __init__(self, bootstrap: str, group: str, topic: str, partitions: int) -> None:
        super().__init__(daemon=True)
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False, request_timeout_ms=30000
        )
        self.tps = [TopicPartition(topic, p) for p in range(partitions)]
        self.consumer.assign(self.tps)
        self.acked: dict[TopicPartition, list[tuple[float, int]]] = {tp: [] for tp in self.tps}
        self.stop_flag = threading.Event()
        self.errors = 0

    def run(self) -> None:
        n = 0
        while not self.stop_flag.is_set():
            n += 1
            offsets = {tp: OffsetAndMetadata(n * 10 + i, "", -1) for i, tp in enumerate(self.tps)}
            try:
                self.consumer.commit(offsets)
            except Exception:
                self.errors += 1  # a failed commit promises nothing
                time.sleep(0.1)
                continue
            now = time.monotonic()
            for tp, om in offsets.items():
                self.acked[tp].append((now, om.offset))
        self.consumer.close(autocommit=False)

    def acked_before(self, t: float) -> dict[TopicPartition, int]:
        return {tp: max((o for ts, o in acks if ts < t), default=-1) for tp, acks in self.acked.items()}

    def last_acked(self) -> dict[TopicPartition, int]:
        return {tp: acks[-1][1] for tp, acks in self.acked.items() if acks}


def fetch_offsets(bootstrap: str, group: str) -> dict[TopicPartition, int]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        result = admin.list_group_offsets(group)[group]  # OffsetFetch v8: group -> {tp: OffsetAndMetadata}
    finally:
        admin.close()
    return {tp: om.offset for tp, om in result.items()}


def test_kill9_keeps_every_acknowledged_commit_and_static_members(upstream: Upstream, java_peer) -> None:
    topic, offsets_topic = unique("durable"), internal_topic()
    kcoord = start_kcoord(upstream, offsets_topic)
    try:
        create_topic(kcoord.bootstrap, topic, 4)
        produce_numbered(kcoord.bootstrap, topic, 4000, 4)

        # Java static members consuming slowly and committing after every poll. kcoord is every
        # broker address these clients know, so while it is down the whole cluster looks gone; a
        # Java client (3.8+) then rebootstraps (KIP-899) to an empty cluster view, and a consumer
        # leader whose view lost its topic's partitions rejoins — a client-side rebalance, not one
        # kcoord starts. metadata.recovery.strategy=none keeps the cached view, as it would stay
        # with a Kafka coordinator failover where the other brokers remain reachable.
        java_group = unique("durable-java")
        static = ["--session-timeout-ms", "45000", "--close", "remain", "--commit", "--max-poll-records", "5",
                  "--poll-ms", "100", "--max-seconds", "240", "--metadata-recovery-strategy", "none"]  # fmt: skip
        peers = [
            java_peer(
                "ConsumerPeer",
                [
                    "--bootstrap",
                    kcoord.bootstrap,
                    "--group",
                    java_group,
                    "--topic",
                    topic,
                    "--instance-id",
                    iid,
                    *static,
                ],
                name=iid,
            )  # fmt: skip
            for iid in ("d1", "d2")
        ]
        generation = None
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            latest = [p.latest("assigned") for p in peers]
            if all(latest) and len({a["generation"] for a in latest}) == 1:  # type: ignore[index]
                owned = [tp for a in latest for tp in a["current"]]  # type: ignore[index]
                if sorted(owned) == sorted(set(owned)) and len(owned) == 4:
                    generation = latest[0]["generation"]  # type: ignore[index]
                    break
            time.sleep(0.2)
        assert generation is not None, "static group did not settle"
        for p in peers:
            p.wait_for("committed", timeout=60)

        py_group = unique("durable-py")
        committer = SimpleCommitter(kcoord.bootstrap, py_group, topic, 4)
        committer.start()
        # commits flowing from both clients: the Java peers' already are (above); the committer's after 20
        wait_until(lambda: min(len(a) for a in committer.acked.values()) >= 20, 60, "the committer's commits")

        killed_at = time.monotonic()
        kcoord.kill()
        java_acked = [
            {tp: off for e in p.events if e["event"] == "committed" and e["ts"] / 1000 < time.time()
             for tp, off in e["offsets"].items()}
            for p in peers
        ]  # fmt: skip
        python_acked = committer.acked_before(killed_at)
        assert all(o > 0 for o in python_acked.values())

        kcoord = start_kcoord(upstream, offsets_topic, port=kcoord.port)
        # clients find the coordinator again and keep committing: each has a commit acknowledged by
        # the restarted kcoord (a static member it did not know would have rejoined, not committed)
        restarted, restarted_wall = time.monotonic(), time.time()
        wait_until(
            lambda: (
                all(a and a[-1][0] > restarted for a in committer.acked.values())
                and all(
                    any(e["event"] == "committed" and e["ts"] / 1000 > restarted_wall for e in list(p.events))
                    for p in peers
                )
            ),
            60,
            "commits acknowledged by the restarted kcoord",
        )
        committer.stop_flag.set()
        committer.join(60)

        fetched = fetch_offsets(kcoord.bootstrap, py_group)
        for tp, before in python_acked.items():
            assert fetched[tp] >= before, (tp, fetched[tp], before)  # nothing acknowledged was lost
        assert fetched == committer.last_acked()

        described = run_admin(kcoord.bootstrap, "describe", java_group)["groups"][0]
        assert sorted(m["groupInstanceId"] for m in described["members"]) == ["d1", "d2"]
        java_fetched = run_admin(kcoord.bootstrap, "list-offsets", java_group)["offsets"]
        for acked in java_acked:
            for tp, off in acked.items():
                assert java_fetched[tp]["offset"] >= off, (tp, java_fetched[tp], off)
        for p in peers:
            assert p.latest("assigned")["generation"] == generation  # static members resumed: no rebalance
            assert p.latest("fenced") is None
    finally:
        kcoord.kill()


def test_restart_during_rebalance_completes_with_single_owners(upstream: Upstream, java_peer) -> None:
    topic, offsets_topic, group = unique("rebal"), internal_topic(), unique("rebal-group")
    kcoord = start_kcoord(upstream, offsets_topic)
    try:
        create_topic(kcoord.bootstrap, topic, 6)
        common = ["--bootstrap", kcoord.bootstrap, "--group", group, "--topic", topic, "--session-timeout-ms",
                  "10000", "--max-seconds", "180"]  # fmt: skip
        peers: list[JavaPeer] = [java_peer("ConsumerPeer", common, name=f"c{i}") for i in range(2)]
        for p in peers:
            p.wait_for("assigned", lambda e: e["current"], timeout=60)
        peers.append(java_peer("ConsumerPeer", common, name="c2"))
        peers[2].wait_for("started", timeout=30)
        time.sleep(1.0)  # the newcomer's JoinGroup has put the group into a rebalance
        kcoord.kill()
        kcoord = start_kcoord(upstream, offsets_topic, port=kcoord.port)

        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            latest = [p.latest("assigned") for p in peers]
            if all(latest):
                owned = [tp for a in latest for tp in a["current"]]  # type: ignore[index]
                if len(owned) == 6 and len(set(owned)) == 6 and len({a["generation"] for a in latest}) == 1:  # type: ignore[index]
                    break
            time.sleep(0.2)
        else:
            raise AssertionError(
                f"no clean assignment after restart: {[p.latest('assigned') for p in peers]}"
            )
    finally:
        kcoord.kill()


def commit_once(address: str, group: str, offset: int, topic: str) -> int:
    """A generation -1 OffsetCommit v8 of one partition; returns the partition's error code."""
    R = m.OffsetCommitRequest
    request = R(
        group_id=group, generation_id_or_member_epoch=-1, member_id="",
        topics=[R.OffsetCommitRequestTopic(
            name=topic, partitions=[R.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)]
        )],
    )  # fmt: skip
    with WireClient(address) as client:
        response = client.request(8, 8, request)
    return response.topics[0].partitions[0].error_code


def fetch_once(address: str, group: str, topic: str) -> int:
    R = m.OffsetFetchRequest
    with WireClient(address) as client:
        response = client.request(
            9, 6, R(group_id=group, topics=[R.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])])
        )
    return response.topics[0].partitions[0].committed_offset


def test_a_second_kcoord_on_the_same_topic_fences_the_first(upstream: Upstream) -> None:
    offsets_topic, group = internal_topic(), unique("fence-group")
    first = start_kcoord(upstream, offsets_topic)
    second: KcoordProcess | None = None
    try:
        topic = unique("fenced")
        create_topic(first.bootstrap, topic, 1)  # commits name topics that exist
        assert commit_once(first.bootstrap, group, 42, topic) == 0
        second = start_kcoord(
            upstream, offsets_topic
        )  # takes ownership of every shard: epoch bump + fence write
        assert fetch_once(second.bootstrap, group, topic) == 42  # it loaded what the first acknowledged
        # The zombie's next write is rejected by the cluster, so it must not acknowledge it.
        assert commit_once(first.bootstrap, group, 99, topic) == ErrorCode.NOT_COORDINATOR
        assert commit_once(second.bootstrap, group, 43, topic) == 0
        assert fetch_once(second.bootstrap, group, topic) == 43
        assert "fenced" in first.log_tail(200)
    finally:
        first.kill()
        if second is not None:
            second.kill()
