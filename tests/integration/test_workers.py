"""``kcoord serve --workers 2`` in front of a real upstream (tansu, and Kafka 4.0): stock clients
(confluent-kafka and kafka-python) in groups served by both workers commit through the one shared
port; a kill -9 of one worker under that committing load is repaired by the supervisor (LeaveGroup
of the dead member, a replacement), every group commits again within seconds, and every
acknowledged commit is read back; new members rejoin at the committed offsets; SIGTERM stops it all.
Without a bootstrap.server the supervisor starts the one embedded broker the workers share.

The workers join the cluster's group as dynamic members on tansu (it mishandles static members,
docs/tansu.md) and as static members (kcoord's default) on Kafka. ``KCOORD_WORKERS_KILLS=N``
repeats the kill N times for recovery-time figures (the default run kills once).
"""

from __future__ import annotations

import os
import re
import signal
import time
import urllib.request
from collections.abc import Iterator

import pytest
from kafka import KafkaConsumer, TopicPartition

from kcoord.coordinator.runtime.router import shard_for_group
from support.kcoord_cluster import BASE_NODE_ID, committed_offsets, coordinator_of
from support.kcoord_process import KcoordProcess
from support.ports import free_port
from support.workload import create_topic, produce_numbered, unique, wait_until
from tests.integration.test_cluster_failover import (
    MEMBER_SESSION_MS,
    ConfluentMember,
    KafkaPythonMember,
    Member,
)
from tests.support.fixtures import Upstream

pytestmark = pytest.mark.integration

SHARDS = 6
PARTITIONS = 2
RECORDS = 20_000
# Kafka refuses sessions below its group.min.session.timeout.ms (6 s); the supervisor's LeaveGroup
# makes the recovery independent of it anyway.
CLUSTER_SESSION_MS = 6000
# kill -9 -> the supervisor's LeaveGroup -> the live worker rejoins (a heartbeat interval) -> tansu
# holds the rebalance (session / 2; Kafka waits for the members' rejoin) -> the replacement (same
# node id) loads the shards -> the client rediscovers its coordinator and retries.
RECOVERY_BOUND_S = 15.0
MEMBER_SESSION_S = MEMBER_SESSION_MS / 1000
KILLS = int(os.environ.get("KCOORD_WORKERS_KILLS", "1"))
_WORKER_SERVES = re.compile(r"worker (\d+) \(node (\d+), pid (\d+)\) serves on port (\d+)")


def every_worker_ready(metrics_port: int) -> bool:
    """The supervisor's /readyz: 200 once every worker answers its own with 200."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/readyz", timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


class Workers(KcoordProcess):
    """The supervisor as a child process; its workers found in its log."""

    def __init__(self, upstream: Upstream) -> None:
        self.metrics_port = free_port()
        self.topic = unique("__kcoord_workers")
        super().__init__(
            "--workers", "2",
            "--shards", str(SHARDS),
            "--internal-topic", self.topic,
            "--cluster-static-membership", "true" if upstream.kind == "kafka" else "false",
            "--cluster-session-timeout-ms", str(CLUSTER_SESSION_MS),
            "--cluster-heartbeat-interval-ms", "500",
            "--metrics", f"127.0.0.1:{self.metrics_port}",
            bootstrap=upstream.bootstrap,
        )  # fmt: skip

    def ready(self) -> bool:
        return every_worker_ready(self.metrics_port)

    def worker_pids(self) -> dict[int, int]:
        """node id -> pid of its latest process."""
        pids: dict[int, int] = {}
        for line in self.log_lines("serves on port"):
            found = _WORKER_SERVES.search(line)
            if found:
                pids[int(found[2])] = int(found[3])
        return pids


@pytest.fixture
def workers(upstream: Upstream) -> Iterator[Workers]:
    supervisor = Workers(upstream)
    supervisor.start(timeout=90)
    try:
        supervisor.wait_for_log("kcoord workers serving on", 90)
        wait_until(supervisor.ready, 60, "every worker ready")
        yield supervisor
    finally:
        if supervisor.alive:
            supervisor.stop()
        supervisor.kill()


def groups_of_each_worker(bootstrap: str, per_worker: int) -> dict[int, list[str]]:
    """node id -> ``per_worker`` fresh group ids whose coordinator (asked at the shared port) it is."""
    found: dict[int, list[str]] = {BASE_NODE_ID: [], BASE_NODE_ID + 1: []}
    shards_seen: dict[int, int] = {}
    while any(len(groups) < per_worker for groups in found.values()):
        group = unique("workers-group")
        shard = shard_for_group(group, SHARDS)
        node = shards_seen.get(shard)
        if node is None:
            node = shards_seen[shard] = coordinator_of(bootstrap, group)[0]
        if len(found[node]) < per_worker:
            found[node].append(group)
    return found


def first_commit_after(member: Member, moment: float) -> float | None:
    return next((t for t in member.commit_times if t > moment), None)


def kill_and_recover(workers: Workers, members: dict[str, Member], victim: int) -> float:
    """kill -9 the worker of node ``victim``; seconds until every group had a commit acknowledged."""
    old_pid = workers.worker_pids()[victim]
    killed_at = time.time()
    os.kill(old_pid, signal.SIGKILL)
    wait_until(
        lambda: all(first_commit_after(m, killed_at) for m in members.values()),
        RECOVERY_BOUND_S,
        f"every group committing again after worker node {victim} was killed",
    )
    recovered = max(first_commit_after(m, killed_at) or 0.0 for m in members.values()) - killed_at
    wait_until(lambda: workers.worker_pids().get(victim, old_pid) != old_pid, 20, "a replacement")
    wait_until(workers.ready, 30, "every worker ready again")
    assert any("removed from the cluster's group" in line for line in workers.log_lines("restart"))
    return recovered


def test_two_workers_serve_stock_clients_and_replace_a_killed_worker_losing_no_commit(
    workers: Workers,
) -> None:
    bootstrap = workers.bootstrap  # the one port both workers accept on
    topic = unique("workers-topic")
    create_topic(bootstrap, topic, PARTITIONS)
    produce_numbered(bootstrap, topic, RECORDS, PARTITIONS)
    groups = groups_of_each_worker(bootstrap, per_worker=2)
    members: dict[str, Member] = {}
    for node, (python_group, confluent_group) in groups.items():
        members[python_group] = KafkaPythonMember(bootstrap, python_group, topic)
        members[confluent_group] = ConfluentMember(bootstrap, confluent_group, topic, f"member-{node}")
    for member in members.values():
        member.start()
    try:
        wait_until(lambda: all(m.commit_times for m in members.values()), 30, "every group committing")
        # Both workers serve: FindCoordinator at the shared port named each of them for its groups.
        assert {coordinator_of(bootstrap, g)[0] for g in members} == {BASE_NODE_ID, BASE_NODE_ID + 1}

        recoveries: list[float] = []
        recoveries = [kill_and_recover(workers, members, BASE_NODE_ID + n % 2) for n in range(KILLS)]
        print(f"recovery after kill -9 of a worker (s): {[round(r, 2) for r in recoveries]}")
        # The replacement took its shards back from the survivor: each member commits to its
        # group's coordinator again before it closes, so its LeaveGroup goes there too (a leave
        # sent to the survivor gets NOT_COORDINATOR, which kafka-python does not retry).
        settled_at = time.time()
        wait_until(
            lambda: all(first_commit_after(m, settled_at) for m in members.values()),
            RECOVERY_BOUND_S,
            "every group committing once every worker is back",
        )
    finally:
        for member in members.values():
            member.stop_flag.set()
        for member in members.values():
            member.join(30)
    for group, member in members.items():
        assert member.failure is None, f"{group}: {member.failure!r}"
        committed = committed_offsets(bootstrap, group)
        lost = {p: (o, committed.get(p)) for p, o in member.acked.items() if committed.get(p, -1) < o}
        assert lost == {}, f"{group}: acknowledged commits not read back (partition: acked, read): {lost}"

    # New members rejoin the kafka-python groups (their members left on close; a confluent static
    # member is awaited for its session timeout, Kafka's KIP-345 rule) where the last commit left them.
    for group in (g for g, member in members.items() if isinstance(member, KafkaPythonMember)):
        committed = committed_offsets(bootstrap, group)
        consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
        try:
            # A member whose LeaveGroup still met a moved coordinator stays until its session ends
            # (Kafka's rule too), and the join waits for it: the bound covers that session.
            deadline = time.monotonic() + MEMBER_SESSION_S + 15
            while not consumer.assignment() and time.monotonic() < deadline:
                consumer.poll(timeout_ms=200, max_records=1)
            assert len(consumer.assignment()) == PARTITIONS, (group, consumer.assignment())
            seen = {p: consumer.committed(TopicPartition(topic, p)) for p in committed}
            assert seen == committed, (group, seen, committed)
            for p, offset in committed.items():  # fetching resumes at the committed offset (or past it
                assert consumer.position(TopicPartition(topic, p)) >= offset  # once a poll returned records)
        finally:
            consumer.close(autocommit=False)

    merged = urllib.request.urlopen(f"http://127.0.0.1:{workers.metrics_port}/metrics", timeout=5).read()
    assert b'worker="0"' in merged and b'worker="1"' in merged
    started = time.monotonic()
    assert workers.stop() == 0
    print(f"SIGTERM to stopped: {time.monotonic() - started:.2f} s")


def test_two_workers_share_the_supervisors_embedded_broker_and_stop_together() -> None:
    """No bootstrap.server: the supervisor starts the one embedded tansu broker for both workers."""
    metrics_port = free_port()
    supervisor = KcoordProcess("--workers", "2", "--metrics", f"127.0.0.1:{metrics_port}")
    supervisor.start(timeout=90)
    try:
        supervisor.wait_for_log("kcoord workers serving on", 90)
        embedded = supervisor.wait_for_log("embedded tansu broker")
        assert len(embedded) == 1, embedded  # one broker, started by the supervisor
        wait_until(lambda: every_worker_ready(metrics_port), 60, "every worker ready")
        nodes = {coordinator_of(supervisor.bootstrap, unique("embedded-group"))[0] for _ in range(40)}
        assert nodes == {BASE_NODE_ID, BASE_NODE_ID + 1}
        assert supervisor.stop() == 0
        assert supervisor.log_lines("kcoord.workers msg=stopped")
    finally:
        supervisor.kill()
