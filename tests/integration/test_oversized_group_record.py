"""One oversized group costs only itself, with real processes.

kcoord runs with ``--storage kafka`` on an internal topic created beforehand with a small
``max.message.bytes``. tansu stores that config (and reports it in DescribeConfigs) but accepts
batches of any size, so a :class:`~tests.support.fault_upstream.FaultUpstream` in front of it
refuses oversized batches with MESSAGE_TOO_LARGE, as a Kafka broker does. A group whose leader
sends an assignment too large for one record (one member's alone: kcoord splits a group's record
only between members) must get UNKNOWN_SERVER_ERROR on SyncGroup (Kafka's
answer) and rebalance, while another group of the same shard keeps committing and fetching: no
append fails, no shard reloads.
"""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from kcoord.client import BlockingConnection
from kcoord.protocol import messages as m
from kcoord.protocol import storage_messages as sm
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey
from support.broker import TansuBroker, probe_metadata_brokers
from support.kcoord_process import KcoordProcess
from support.workload import create_topic, unique
from tests.support.fault_upstream import FaultUpstream
from tests.support.wire import WireClient

pytestmark = pytest.mark.integration

MAX_MESSAGE_BYTES = 50_000
SUBSCRIPTION = b"\x00\x00" + m.ConsumerProtocolSubscription(topics=["t"], user_data=None).encode(0)


def create_internal_topic(tansu: TansuBroker, name: str, partitions: int) -> None:
    """The internal topic as an operator would create it: compacted, with a small max.message.bytes."""
    host, port = tansu.bootstrap.rsplit(":", 1)
    C = sm.CreateTopicsRequest
    conn = BlockingConnection((host, int(port)), 10.0)
    try:
        resp = conn.request(C(timeout_ms=10_000, topics=[C.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=1, configs=[
                C.CreatableTopicConfig(name="cleanup.policy", value="compact"),
                C.CreatableTopicConfig(name="max.message.bytes", value=str(MAX_MESSAGE_BYTES))])]))  # fmt: skip
    finally:
        conn.close()
    assert resp.topics[0].error_code == ErrorCode.NONE, resp


class SteadyGroup(threading.Thread):
    """Commits and fetches offsets of another group on the same shard, recording every error code."""

    def __init__(self, address: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.address, self.topic = address, topic
        self.group = unique("steady")
        self.stop_flag = threading.Event()
        self.codes: list[tuple[str, int]] = []
        self.commits = 0

    def run(self) -> None:
        C, F = m.OffsetCommitRequest, m.OffsetFetchRequest
        with WireClient(self.address) as client:
            n = 0
            while not self.stop_flag.is_set():
                n += 1
                resp = client.request(ApiKey.OFFSET_COMMIT, 8, C(
                    group_id=self.group, generation_id_or_member_epoch=-1, member_id="", topics=[
                        C.OffsetCommitRequestTopic(name=self.topic, partitions=[
                            C.OffsetCommitRequestPartition(partition_index=0, committed_offset=n)])]))  # fmt: skip
                self.codes += [("commit", p.error_code) for t in resp.topics for p in t.partitions]
                fetched = client.request(ApiKey.OFFSET_FETCH, 7, F(group_id=self.group, topics=[
                    F.OffsetFetchRequestTopic(name=self.topic, partition_indexes=[0])]))  # fmt: skip
                self.codes.append(("fetch", fetched.error_code))
                self.codes += [("fetch", p.error_code) for t in fetched.topics for p in t.partitions]
                if resp.topics[0].partitions[0].error_code == ErrorCode.NONE:
                    self.commits += 1
                    got = fetched.topics[0].partitions[0].committed_offset
                    if got != n:
                        self.codes.append(("fetch-mismatch", got))
                time.sleep(0.01)


def join(address: str, group: str, member_id: str = "") -> Any:
    P = m.JoinGroupRequest.JoinGroupRequestProtocol
    with WireClient(address, timeout=30) as client:
        return client.request(ApiKey.JOIN_GROUP, 9, m.JoinGroupRequest(
            group_id=group, session_timeout_ms=30_000, rebalance_timeout_ms=20_000, member_id=member_id,
            protocol_type="consumer", protocols=[P(name="range", metadata=SUBSCRIPTION)]))  # fmt: skip


def sync(
    address: str, group: str, member_id: str, generation: int, plan: dict[str, bytes] | None = None
) -> Any:
    A = m.SyncGroupRequest.SyncGroupRequestAssignment
    with WireClient(address, timeout=30) as client:
        return client.request(ApiKey.SYNC_GROUP, 5, m.SyncGroupRequest(
            group_id=group, generation_id=generation, member_id=member_id, protocol_type="consumer",
            protocol_name="range", assignments=[A(member_id=k, assignment=v) for k, v in (plan or {}).items()]))  # fmt: skip


def join_both(pool: ThreadPoolExecutor, address: str, group: str, member_ids: list[str]) -> list[Any]:
    answers = list(pool.map(lambda mid: join(address, group, mid), member_ids))
    assert all(a.error_code == ErrorCode.NONE for a in answers), answers
    assert len({a.generation_id for a in answers}) == 1
    return answers


def test_oversized_group_record_fails_its_sync_alone_and_the_shard_keeps_serving(tansu: TansuBroker) -> None:
    internal = f"__kcoord_sized_{uuid.uuid4().hex[:8]}"
    create_internal_topic(tansu, internal, 1)
    host, port = tansu.bootstrap.rsplit(":", 1)
    upstream = FaultUpstream(target=(host, int(port)), node_id=probe_metadata_brokers(host, int(port))[0][0])
    upstream.max_message_bytes[internal] = MAX_MESSAGE_BYTES
    args = ("--storage", "kafka", "--internal-topic", internal, "--shards", "1",
            "--group-initial-rebalance-delay-ms", "1000")  # fmt: skip
    with upstream, KcoordProcess(*args, bootstrap=upstream.address) as kcoord, ThreadPoolExecutor(4) as pool:
        log = kcoord.log_path.read_text()
        assert f"internal topic {internal}: max.message.bytes={MAX_MESSAGE_BYTES}" in log, kcoord.log_tail()
        topic = unique("sized")
        create_topic(kcoord.bootstrap, topic, 2)
        steady = SteadyGroup(kcoord.bootstrap, topic)
        steady.start()
        try:
            big = unique("oversized")
            first = [join(kcoord.bootstrap, big) for _ in range(2)]
            assert all(f.error_code == ErrorCode.MEMBER_ID_REQUIRED for f in first), first
            joined = join_both(pool, kcoord.bootstrap, big, [f.member_id for f in first])
            leader, generation = joined[0].leader, joined[0].generation_id
            follower = next(a.member_id for a in joined if a.member_id != leader)

            # Two 60 kB assignments: each member alone is over the topic's limit, so no split fits.
            plan = {a.member_id: b"\x00\x00" + b"p" * 60_000 for a in joined}
            parked = pool.submit(sync, kcoord.bootstrap, big, follower, generation)
            time.sleep(0.3)  # the follower waits for the leader's assignment
            lead = sync(kcoord.bootstrap, big, leader, generation, plan)
            assert lead.error_code == ErrorCode.UNKNOWN_SERVER_ERROR, lead
            assert parked.result(30).error_code == ErrorCode.UNKNOWN_SERVER_ERROR

            # The group lives on: it rebalances, and a writable assignment completes it.
            with WireClient(kcoord.bootstrap) as client:
                hb = client.request(ApiKey.HEARTBEAT, 4, m.HeartbeatRequest(
                    group_id=big, generation_id=generation, member_id=leader))  # fmt: skip
            assert hb.error_code == ErrorCode.REBALANCE_IN_PROGRESS
            joined = join_both(pool, kcoord.bootstrap, big, [leader, follower])
            leader, generation = joined[0].leader, joined[0].generation_id
            small = {a.member_id: b"\x00\x00" + b"p" * 100 for a in joined}
            answers = list(pool.map(lambda mid: sync(kcoord.bootstrap, big, mid, generation,
                                                     small if mid == leader else None), [leader, follower]))  # fmt: skip
            assert [a.error_code for a in answers] == [ErrorCode.NONE] * 2, answers
            assert {a.assignment for a in answers} == {b"\x00\x00" + b"p" * 100}
            time.sleep(0.5)
        finally:
            steady.stop_flag.set()
            steady.join(30)

        # The other group was served throughout: every commit and fetch answered NONE.
        assert steady.commits > 10, steady.commits
        assert {code for _, code in steady.codes} == {ErrorCode.NONE}, sorted(set(steady.codes))
        log = kcoord.log_path.read_text()
        assert "reloading" not in log and "append of" not in log, kcoord.log_tail()
        assert "not written" in log
        assert upstream.faults["message_too_large"] == 0  # kcoord never sent what the log refuses
