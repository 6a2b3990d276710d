"""Bad transactional input through kcoord, with raw requests: a
TxnOffsetCommit from a producer whose transaction never added the group, from a producer the
upstream does not know, for a group member it does not name, or after its transaction ended gets
Kafka's error code and never makes an offset visible; a malformed AddOffsetsToTxn closes only its
own connection.

The client side is played by hand: FindCoordinator (transaction key) and InitProducerId through
kcoord's broker port, AddOffsetsToTxn (answered by kcoord), TxnOffsetCommit to the coordinator,
EndTxn relayed to the upstream transaction coordinator. TxnOffsetCommit v5 (KIP-890) does without
AddOffsetsToTxn: kcoord adds the group itself (no stock client sends v5 to kcoord, which offers
clients transactions v1 only, so it is played by hand too).
"""

from __future__ import annotations

import struct
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from kcoord.client import BlockingConnection
from kcoord.protocol import messages as m
from kcoord.protocol import storage_messages as sm
from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.messages import ApiKey
from support.broker import TansuBroker
from support.kcoord_process import KcoordProcess
from support.workload import create_topic, unique
from tests.support.wire import WireClient

pytestmark = pytest.mark.integration

TXN = m.TxnOffsetCommitRequest


@dataclass
class Env:
    kcoord: KcoordProcess
    topic: str

    def connect(self, address: str | None = None) -> BlockingConnection:
        host, port = (address or self.kcoord.bootstrap).rsplit(":", 1)
        return BlockingConnection((host, int(port)), 10.0)


@pytest.fixture(scope="module")
def env(tansu: TansuBroker) -> Iterator[Env]:
    with KcoordProcess("--shards", "3", "--storage", "kafka", "--internal-topic", unique("__kcoord_eosbad"),
                       bootstrap=tansu.bootstrap) as proc:  # fmt: skip
        topic = unique("eosbad")
        create_topic(proc.bootstrap, topic, 2)
        yield Env(proc, topic)


class Producer:
    """A transactional producer's requests, by hand, on kcoord's transaction coordinator port."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.transactional_id = unique("eosbad-tx")
        with env.connect() as c:
            found = c.request(m.FindCoordinatorRequest(key=self.transactional_id, key_type=1), 2)
        assert found.error_code == 0, found
        self.coordinator = f"{found.host}:{found.port}"
        self.conn = env.connect(self.coordinator)
        self.producer_id, self.epoch = self.init()

    def init(self) -> tuple[int, int]:
        resp = self.conn.request(
            sm.InitProducerIdRequest(transactional_id=self.transactional_id, transaction_timeout_ms=60_000)
        )
        assert resp.error_code == 0, resp
        return resp.producer_id, resp.producer_epoch

    def add_offsets(self, group: str, *, producer_id: int | None = None, epoch: int | None = None,
                    transactional_id: str | None = None, version: int = 3) -> int:  # fmt: skip
        req = m.AddOffsetsToTxnRequest(
            transactional_id=transactional_id or self.transactional_id, group_id=group,
            producer_id=self.producer_id if producer_id is None else producer_id,
            producer_epoch=self.epoch if epoch is None else epoch,
        )  # fmt: skip
        return int(self.conn.request(req, version).error_code)

    def end(self, committed: bool) -> int:
        req = sm.EndTxnRequest(transactional_id=self.transactional_id, producer_id=self.producer_id,
                               producer_epoch=self.epoch, committed=committed)  # fmt: skip
        return int(self.conn.request(req, 3).error_code)

    def txn_commit(self, group: str, offset: int, *, producer_id: int | None = None, epoch: int | None = None,
                   member_id: str = "", generation: int = -1, partition: int = 0, version: int = 3) -> int:  # fmt: skip
        req = TXN(
            transactional_id=self.transactional_id, group_id=group,
            producer_id=self.producer_id if producer_id is None else producer_id,
            producer_epoch=self.epoch if epoch is None else epoch,
            generation_id_or_member_epoch=generation, member_id=member_id,
            topics=[TXN.TxnOffsetCommitRequestTopic(name=self.env.topic, partitions=[
                TXN.TxnOffsetCommitRequestPartition(partition_index=partition, committed_offset=offset)])],
        )  # fmt: skip
        with self.env.connect() as c:
            resp = c.request(req, version)
        (code,) = {p.error_code for t in resp.topics for p in t.partitions}
        return int(code)

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def producer(env: Env) -> Iterator[Producer]:
    p = Producer(env)
    yield p
    p.close()


def stable_offset(env: Env, group: str, partition: int = 0) -> tuple[int, int]:
    """(offset, error) of an OffsetFetch v7 with RequireStable."""
    R = m.OffsetFetchRequest
    req = R(group_id=group, require_stable=True,
            topics=[R.OffsetFetchRequestTopic(name=env.topic, partition_indexes=[partition])])  # fmt: skip
    with WireClient(env.kcoord.bootstrap) as client:
        resp = client.request(ApiKey.OFFSET_FETCH, 7, req)
    (p,) = resp.topics[0].partitions
    return p.committed_offset, p.error_code


def wait_offset(env: Env, group: str, expected: int) -> None:
    deadline = time.monotonic() + 10
    while (got := stable_offset(env, group)) != (expected, 0):
        assert time.monotonic() < deadline, f"{group}: {got}, expected {expected}"
        time.sleep(0.05)


def test_a_commit_whose_transaction_never_added_the_group_is_invalid_txn_state(
    env: Env, producer: Producer
) -> None:
    group = unique("eosbad-g")
    assert producer.txn_commit(group, 5) == E.INVALID_TXN_STATE
    assert stable_offset(env, group) == (-1, 0)


def test_producers_the_upstream_does_not_know_get_its_error_and_commit_nothing(
    env: Env, producer: Producer
) -> None:
    group = unique("eosbad-g")
    # An unknown transactional id, a producer id the id does not map to, a future epoch: the
    # upstream transaction coordinator's answers (tansu: TRANSACTIONAL_ID_NOT_FOUND, UNKNOWN_PRODUCER_ID,
    # PRODUCER_FENCED; Kafka: INVALID_PRODUCER_ID_MAPPING or PRODUCER_FENCED) are passed on.
    assert producer.add_offsets(group, transactional_id=unique("never-inited")) != E.NONE
    assert producer.add_offsets(group, producer_id=producer.producer_id + 10_000) != E.NONE
    assert producer.add_offsets(group, epoch=producer.epoch + 5) == E.PRODUCER_FENCED
    assert producer.txn_commit(group, 5, producer_id=producer.producer_id + 10_000) == E.INVALID_TXN_STATE
    assert producer.txn_commit(group, 5) == E.INVALID_TXN_STATE
    assert stable_offset(env, group) == (-1, 0)


def test_a_commit_after_its_transaction_ended_is_invalid_txn_state(env: Env, producer: Producer) -> None:
    group = unique("eosbad-g")
    assert producer.add_offsets(group) == E.NONE
    assert producer.txn_commit(group, 5) == E.NONE
    assert stable_offset(env, group) == (-1, E.UNSTABLE_OFFSET_COMMIT)
    assert producer.end(committed=True) == E.NONE
    wait_offset(env, group, 5)
    assert producer.txn_commit(group, 9) == E.INVALID_TXN_STATE
    assert producer.add_offsets(group) == E.NONE  # the next transaction, aborted
    assert producer.txn_commit(group, 11) == E.NONE
    assert producer.end(committed=False) == E.NONE
    assert producer.txn_commit(group, 12) == E.INVALID_TXN_STATE
    time.sleep(0.3)
    wait_offset(env, group, 5)


def test_a_zombie_epoch_is_fenced(env: Env, producer: Producer) -> None:
    group = unique("eosbad-g")
    old_epoch = producer.epoch
    assert producer.add_offsets(group) == E.NONE
    assert producer.txn_commit(group, 3) == E.NONE
    producer.producer_id, producer.epoch = (
        producer.init()
    )  # a new instance: bumps the epoch, aborts the transaction
    assert producer.epoch > old_epoch
    assert producer.add_offsets(group, epoch=old_epoch) == E.PRODUCER_FENCED
    assert (
        producer.add_offsets(group, epoch=old_epoch, version=1) == E.INVALID_PRODUCER_EPOCH
    )  # no PRODUCER_FENCED before v2
    assert producer.add_offsets(group) == E.NONE
    assert producer.txn_commit(group, 666, epoch=old_epoch) == E.INVALID_PRODUCER_EPOCH
    assert producer.txn_commit(group, 7) == E.NONE
    assert producer.end(committed=True) == E.NONE
    wait_offset(env, group, 7)


def test_a_commit_for_a_member_the_group_does_not_have_is_refused(env: Env, producer: Producer) -> None:
    group, member = unique("eosbad-cg"), str(uuid.uuid4())
    H = m.ConsumerGroupHeartbeatRequest
    with WireClient(env.kcoord.bootstrap) as client:
        joined = client.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, H(
            group_id=group, member_id=member, member_epoch=0, rebalance_timeout_ms=30_000,
            subscribed_topic_names=[env.topic], topic_partitions=[]))  # fmt: skip
    assert joined.error_code == 0, joined
    assert producer.add_offsets(group) == E.NONE
    assert (
        producer.txn_commit(group, 4, member_id="ghost", generation=joined.member_epoch)
        == E.UNKNOWN_MEMBER_ID
    )
    assert (
        producer.txn_commit(group, 4, member_id=member, generation=joined.member_epoch + 3)
        == E.ILLEGAL_GENERATION
    )
    assert producer.txn_commit(group, 4, member_id=member, generation=joined.member_epoch) == E.NONE
    assert producer.end(committed=True) == E.NONE
    wait_offset(env, group, 4)


def test_a_malformed_add_offsets_to_txn_closes_only_its_connection(env: Env, producer: Producer) -> None:
    with WireClient(producer.coordinator) as bad:
        # A v3 (flexible) header with no client id and no tags, then a transactional id whose compact
        # length runs far past the frame.
        payload = (
            struct.pack(">hhih", ApiKey.ADD_OFFSETS_TO_TXN, 3, 1, -1) + b"\x00" + b"\xff\xff\xff\xff\x0f"
        )
        bad.send_bytes(struct.pack(">i", len(payload)) + payload)
        assert bad.is_closed_by_server()
    group = unique("eosbad-g")
    assert producer.add_offsets(group) == E.NONE
    assert producer.txn_commit(group, 1) == E.NONE
    assert producer.end(committed=True) == E.NONE
    wait_offset(env, group, 1)


def test_a_new_instance_of_the_producer_commits_after_the_old_one_committed(
    env: Env, producer: Producer
) -> None:
    """What a client does after a fatal error (Kafka Streams, librdkafka apps): a new producer with
    the same transactional id (same producer id, next epoch) right after a committed transaction."""
    group = unique("eosbad-g")
    for offset in (3, 5):
        assert producer.add_offsets(group) == E.NONE
        assert producer.txn_commit(group, offset) == E.NONE
        assert producer.end(committed=True) == E.NONE
        producer.producer_id, producer.epoch = producer.init()
    wait_offset(env, group, 5)


def test_right_after_end_txn_the_transaction_is_over_for_kcoord(env: Env, producer: Producer) -> None:
    """kcoord sees the EndTxn it relays: a TxnOffsetCommit sent right after it is refused even
    before the marker is in kcoord's partition, and the next AddOffsetsToTxn waits for that marker,
    so the next transaction's offsets never join the one that ended."""
    group = unique("eosbad-g")
    for round_ in range(5):
        assert producer.add_offsets(group) == E.NONE
        assert producer.txn_commit(group, 10 + round_) == E.NONE
        assert producer.end(committed=round_ % 2 == 0) == E.NONE
        assert producer.txn_commit(group, 99) == E.INVALID_TXN_STATE
    wait_offset(env, group, 14)


def test_txn_offset_commit_v5_adds_the_group_to_the_transaction_itself(env: Env, producer: Producer) -> None:
    """Kafka 4.0 serves TxnOffsetCommit v5, which also does AddOffsetsToTxn's work: no
    AddOffsetsToTxn before it, the offsets visible at COMMIT, never at ABORT; a commit right after
    EndTxn opens the next transaction (it waits for the marker, as AddOffsetsToTxn does)."""
    group = unique("eosbad-v5")
    assert producer.txn_commit(group, 7, version=5) == E.NONE
    assert stable_offset(env, group) == (-1, E.UNSTABLE_OFFSET_COMMIT)
    assert producer.end(committed=True) == E.NONE
    assert producer.txn_commit(group, 8, version=5) == E.NONE
    assert producer.end(committed=False) == E.NONE
    wait_offset(env, group, 7)
    # The upstream's refusal of the add is the answer, and nothing becomes visible.
    assert producer.txn_commit(group, 9, epoch=producer.epoch + 5, version=5) == E.PRODUCER_FENCED
    assert producer.txn_commit(group, 9, producer_id=producer.producer_id + 10_000, version=5) != E.NONE
    assert stable_offset(env, group) == (7, 0)
