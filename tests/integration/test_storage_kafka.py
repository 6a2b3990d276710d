"""KafkaStorage against a real Kafka-wire broker: the session's upstream, tansu (memory storage) and
then Apache Kafka, each test once per upstream.

The in-memory storage with compacted reads is the oracle: whatever sequence of appends both
receive, KafkaStorage.read() must return exactly what MemoryStorage(compacted_reads=True) does.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from typing import Any

import pytest

from kcoord.coordinator.core.clock import ManualClock
from kcoord.coordinator.core.group_config import GroupConfig
from kcoord.coordinator.core.shard_state import GroupCoordinatorShard
from kcoord.coordinator.ops.settings import Settings
from kcoord.coordinator.runtime.shard import replay_transaction_entry
from kcoord.protocol import storage_messages as sm
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.record_batch import decode_batches, encode_batch
from kcoord.protocol.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    LogEntry,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    TransactionalRecords,
    encode_record,
)
from kcoord.storage.base import (
    DEFAULT_MAX_RECORD_BYTES,
    KAFKA_DEFAULT_MAX_MESSAGE_BYTES,
    FencedError,
    StorageError,
    max_record_bytes_for,
)
from kcoord.storage.kafka import KafkaShardLog, KafkaStorage
from kcoord.storage.memory import MemoryShardLog, MemoryStorage
from tests.support.fixtures import Upstream

pytestmark = pytest.mark.integration

_topics = itertools.count()


@pytest.fixture(scope="module")
def broker(upstream: Upstream) -> Upstream:
    return upstream


def new_topic() -> str:
    return f"kcoord_test_{int(time.time() * 1000) % 10**8}_{next(_topics)}"


def make_storage(broker: Upstream, topic: str, **kw: object) -> KafkaStorage:
    return KafkaStorage([(broker.host, broker.port)], Settings(internal_topic=topic, storage="kafka"), **kw)  # type: ignore[arg-type]


def offset(group: str, partition: int, value: int | None) -> Record:
    key = OffsetCommitKey(group=group, topic="orders", partition=partition)
    if value is None:
        return Record(key, None)
    return Record(
        key,
        OffsetCommitValue(offset=value, leader_epoch=-1, metadata="m", commit_timestamp=1_700_000_000_000),
    )


def group(name: str, generation: int) -> Record:
    member = MemberMetadata(
        member_id="m-1",
        group_instance_id="static-1",
        client_id="c",
        client_host="/127.0.0.1",
        rebalance_timeout=30000,
        session_timeout=10000,
        subscription=b"sub",
        assignment=b"asg",
    )
    return Record(
        GroupMetadataKey(group=name),
        GroupMetadataValue(
            protocol_type="consumer",
            generation=generation,
            protocol="range",
            leader="m-1",
            current_state_timestamp=1_700_000_000_000,
            members=[member],
        ),
    )


async def read_all(storage: KafkaStorage | MemoryStorage, shard: int) -> list[Record]:
    """The plain records a read yields (transactions still open are left out)."""
    return [r async for batch in storage.shard_log(shard).read() if isinstance(batch, list) for r in batch]


async def read_entries(log: KafkaShardLog | MemoryShardLog) -> list[LogEntry]:
    return [entry async for entry in log.read()]


def loaded_offsets(entries: list[LogEntry]) -> dict[str, Any]:
    """Committed and pending offsets of a shard that replayed ``entries`` as the runtime does."""
    shard = GroupCoordinatorShard(GroupConfig(), ManualClock(0))
    for entry in entries:
        if isinstance(entry, list):
            for record in entry:
                shard.replay(record)
        else:
            replay_transaction_entry(shard, entry)
    view = shard.durable_view()
    return {"offsets": view["offsets"], "pending": view["pending_offsets"]}


async def request(storage: KafkaStorage, body: object) -> object:
    conn = await storage.cluster.any_node()
    return await conn.request(body, timeout=10.0)  # type: ignore[arg-type]


async def wait_for_marker(log: KafkaShardLog, producer_id: int) -> None:
    """Apache Kafka answers EndTxn once its transaction coordinator has decided, and writes the
    markers to the partitions after that (tansu writes them before answering): wait for this
    producer's marker in the shard's partition."""
    deadline = time.monotonic() + 10
    while True:
        records, _ = await log.reads.fetch(0)
        if any(b.is_control and b.producer_id == producer_id for b in decode_batches(records or b"")):
            return
        assert time.monotonic() < deadline, f"no transaction marker of producer {producer_id} after 10 s"
        await asyncio.sleep(0.02)


async def begin_transaction(
    storage: KafkaStorage, topic: str, txn_id: str, records: list[Record]
) -> tuple[int, int]:
    """A client's transaction holding ``records`` in ``topic``'s partition 0, left open: (pid, epoch)."""
    init = await request(
        storage, sm.InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=60000)
    )
    pid, epoch = init.producer_id, init.producer_epoch  # type: ignore[attr-defined]
    add = sm.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn_id,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[
            sm.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic, partitions=[0])
        ],
    )
    await request(storage, add)
    batch = encode_batch(
        [encode_record(r) for r in records],
        timestamp=int(time.time() * 1000),
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=0,
        transactional=True,
    )
    produce = sm.ProduceRequest(
        transactional_id=txn_id,
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            sm.ProduceRequest.TopicProduceData(
                name=topic, partition_data=[sm.ProduceRequest.PartitionProduceData(index=0, records=batch)]
            )
        ],
    )
    resp = await request(storage, produce)
    assert resp.responses[0].partition_responses[0].error_code == 0  # type: ignore[attr-defined]
    return pid, epoch


async def test_creates_compacted_topic_with_one_partition_per_shard(broker: Upstream) -> None:
    topic = new_topic()
    storage = make_storage(broker, topic)
    await storage.open(5)
    try:
        assert storage.cluster.partition_count == 5
        assert (await storage.internal_topic.configs())["cleanup.policy"] == "compact"
        # The topic does not set max.message.bytes: Kafka's default sizes records and batches.
        assert storage.max_message_bytes == KAFKA_DEFAULT_MAX_MESSAGE_BYTES
        assert storage.max_record_bytes == DEFAULT_MAX_RECORD_BYTES
        assert [await read_all(storage, s) for s in range(5)] == [[]] * 5
    finally:
        await storage.close()
    again = make_storage(broker, topic)  # an existing, matching topic is accepted as it is
    await again.open(5)
    await again.close()


async def test_wrong_partition_count_is_a_startup_error(broker: Upstream) -> None:
    topic = new_topic()
    first = make_storage(broker, topic)
    await first.open(4)
    await first.close()
    second = make_storage(broker, topic)
    with pytest.raises(StorageError, match=r"has 4 partitions but kcoord runs 3 shards"):
        await second.open(3)
    await second.close()


async def test_non_compacted_topic_is_a_startup_error(broker: Upstream) -> None:
    topic = new_topic()
    storage = make_storage(broker, topic)
    create = sm.CreateTopicsRequest(
        topics=[
            sm.CreateTopicsRequest.CreatableTopic(
                name=topic, num_partitions=2, replication_factor=1, configs=[]
            )
        ],
        timeout_ms=5000,
    )
    resp = await request(storage, create)
    assert resp.topics[0].error_code == 0  # type: ignore[attr-defined]
    # Apache Kafka's DescribeConfigs reports the default policy; tansu reports only configs set at
    # creation, so kcoord names the default itself.
    with pytest.raises(
        StorageError, match=r"cleanup\.policy=delete( \(the default\))?; kcoord needs cleanup\.policy=compact"
    ):
        await storage.open(2)
    await storage.close()


async def test_the_topics_max_message_bytes_sizes_records_and_batches(broker: Upstream) -> None:
    topic = new_topic()
    storage = make_storage(broker, topic)
    C = sm.CreateTopicsRequest
    resp = await request(storage, C(timeout_ms=5000, topics=[C.CreatableTopic(
        name=topic, num_partitions=2, replication_factor=1, configs=[
            C.CreatableTopicConfig(name="cleanup.policy", value="compact"),
            C.CreatableTopicConfig(name="max.message.bytes", value="50000")])]))  # fmt: skip
    assert resp.topics[0].error_code == 0  # type: ignore[attr-defined]
    try:
        await storage.open(2)
        assert storage.max_message_bytes == 50_000
        assert storage.max_record_bytes == max_record_bytes_for(50_000) == 50_000 - 61 - 23
        assert storage.max_batch_bytes == 50_000 - 50_000 // 8
        # An append larger than a batch may be goes out in batches under the limit, and reads back.
        records = [offset("g", p, p) for p in range(2000)]  # ~100 kB of records
        await storage.shard_log(0).append(records)
        assert len(await read_all(storage, 0)) == 2000
    finally:
        await storage.close()


async def test_append_then_read_back_exactly_like_a_compacted_log(broker: Upstream) -> None:
    storage = make_storage(broker, new_topic())
    oracle = MemoryStorage(compacted_reads=True)
    await storage.open(3)
    await oracle.open(3)
    appends = [
        [offset("g1", 0, 10), offset("g1", 1, 20), group("g1", 1)],
        [offset("g1", 0, 11)],
        [offset("g1", 1, None)],  # tombstone: the offset is deleted
        [group("g2", 1), offset("g2", 0, 5), offset("g1", 2, 7)],
        [group("g2", 2)],  # new generation replaces the old value
        [Record(GroupMetadataKey(group="g2"), None), offset("g2", 0, None)],  # group deleted
        [offset("g3", p, p) for p in range(300)],
    ]
    try:
        for records in appends:
            await storage.shard_log(1).append(records)
            await oracle.shard_log(1).append(records)
        got = await read_all(storage, 1)
        assert got == await read_all(oracle, 1)
        assert offset("g1", 0, 11) in got and offset("g1", 1, 20) not in got
        assert all(r.key != GroupMetadataKey(group="g2") for r in got)
        assert await read_all(storage, 0) == [] and await read_all(storage, 2) == []
    finally:
        await storage.close()


async def test_a_log_compacted_by_kafka_loads_the_same_state(broker: Upstream) -> None:
    """Kafka's log cleaner drops superseded values (tansu never compacts): a fresh kcoord loading
    the cleaned partition gets the state the whole log gave. The topic rolls a segment per append
    round (segment.ms) so the cleaner, which leaves the active segment alone, has work."""
    if broker.kind != "kafka":
        pytest.skip("tansu 0.6 never compacts (docs/tansu.md)")
    topic = new_topic()
    storage = make_storage(broker, topic)
    C = sm.CreateTopicsRequest
    configs = {"cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
               "min.compaction.lag.ms": "0", "delete.retention.ms": "0"}  # fmt: skip
    created = await request(storage, C(timeout_ms=10000, topics=[C.CreatableTopic(
        name=topic, num_partitions=1, replication_factor=1,
        configs=[C.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])]))  # fmt: skip
    assert created.topics[0].error_code == 0  # type: ignore[attr-defined]
    await storage.open(1)
    oracle = MemoryStorage(compacted_reads=True)
    await oracle.open(1)
    log = storage.shard_log(0)
    try:
        for round_ in range(6):
            records = [offset("g", p, round_ * 10 + p) for p in range(5)] + [group("g", round_ + 1)]
            if round_ == 5:
                records.append(offset("g", 4, None))
            await log.append(records)
            await oracle.shard_log(0).append(records)
            await asyncio.sleep(0.15)  # past segment.ms: the next append rolls a new segment

        async def stored() -> int:
            """Records in the partition now (a Fetch answers from one segment: read on to the end)."""
            count, at, end = 0, 0, 1
            while at < end:
                records, end = await log.reads.fetch(at)
                batches = decode_batches(records or b"")
                if not batches:
                    break
                count += sum(len(b.records) for b in batches)
                at = batches[-1].next_offset
            return count

        written = await stored()
        deadline = time.monotonic() + 60  # the cleaner looks every log.cleaner.backoff.ms (15 s)
        while await stored() >= written:
            assert time.monotonic() < deadline, f"{written} records, none cleaned after 60 s"
            await asyncio.sleep(0.5)
        fresh = make_storage(broker, topic)
        await fresh.open(1)
        try:
            assert await read_all(fresh, 0) == await read_all(oracle, 0)
        finally:
            await fresh.close()
    finally:
        await storage.close()


async def test_fresh_instance_reads_what_the_previous_wrote(broker: Upstream) -> None:
    topic = new_topic()
    first = make_storage(broker, topic)
    await first.open(2)
    written = [offset("g", p, p * 100) for p in range(50)] + [group("g", 3)]
    await first.shard_log(0).append(written)
    await first.close()

    second = make_storage(broker, topic)
    await second.open(2)
    try:
        assert await read_all(second, 0) == written
        await second.shard_log(0).append([offset("g", 0, 1)])  # and it may write after taking over
        assert (await read_all(second, 0))[-1] == offset("g", 0, 1)
    finally:
        await second.close()


async def test_large_append_is_split_but_complete(broker: Upstream) -> None:
    storage = make_storage(broker, new_topic(), max_batch_bytes=2000)
    await storage.open(1)
    try:
        records = [offset("big", p, p) for p in range(500)]
        await storage.shard_log(0).append(records)
        assert await read_all(storage, 0) == records
    finally:
        await storage.close()


async def test_transactional_data_counts_only_when_committed(broker: Upstream) -> None:
    """Aborted and still-open transactions in the topic are invisible; committed ones apply at their marker."""
    topic = new_topic()
    storage = make_storage(broker, topic)
    await storage.open(1)
    try:
        await storage.shard_log(0).append([offset("plain", 0, 1)])

        async def transaction(txn_id: str, records: list[Record], end: bool | None) -> None:
            pid, epoch = await begin_transaction(storage, topic, txn_id, records)
            if end is not None:
                ended = await request(
                    storage,
                    sm.EndTxnRequest(
                        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=end
                    ),
                )
                assert ended.error_code == 0  # type: ignore[attr-defined]
                await wait_for_marker(storage.shard_log(0), pid)

        await transaction("test-abort", [offset("aborted", 0, 1)], end=False)
        await transaction("test-commit", [offset("committed", 0, 2)], end=True)
        await transaction("test-open", [offset("open", 0, 3)], end=None)
        groups = {r.key.group for r in await read_all(storage, 0)}
        assert groups == {"plain", "committed"}
        entries = await read_entries(storage.shard_log(0))
        open_txns = [e for e in entries if isinstance(e, TransactionalRecords)]
        assert [[r.key.group for r in e.records] for e in open_txns] == [["open"]]  # yielded, still pending
    finally:
        await storage.close()


async def test_transactions_load_as_the_memory_oracle_replays_them(broker: Upstream) -> None:
    """Transactional offset commits of clients in kcoord's partition, committed, aborted and open,
    interleaved with kcoord's own writes: the shard state a load of the Kafka log gives equals the
    one the memory log (whole and compacted) gives, before and after the open ones end."""
    topic = new_topic()
    storage = make_storage(broker, topic)
    await storage.open(1)
    oracle = MemoryShardLog()
    kafka_log = storage.shard_log(0)

    async def plain(*records: Record) -> None:
        await kafka_log.append(list(records))
        await oracle.append(list(records))

    async def begin(txn_id: str, *records: Record) -> tuple[int, int]:
        pid, epoch = await begin_transaction(storage, topic, txn_id, list(records))
        await oracle.append_transactional("txn", pid, epoch, list(records))
        return pid, epoch

    async def end(txn_id: str, pid: int, epoch: int, commit: bool) -> None:
        ended = await request(
            storage,
            sm.EndTxnRequest(
                transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=commit
            ),
        )
        assert ended.error_code == 0  # type: ignore[attr-defined]
        await wait_for_marker(kafka_log, pid)
        oracle.write_marker(pid, epoch, commit)

    async def check() -> dict[str, Any]:
        kafka = loaded_offsets(await read_entries(kafka_log))
        assert kafka == loaded_offsets(await read_entries(oracle))
        compacted = MemoryShardLog(compacted_reads=True)
        compacted.entries = list(oracle.entries)
        assert kafka == loaded_offsets(await read_entries(compacted))
        return kafka

    try:
        await plain(offset("g", 0, 1), offset("g", 1, 1))
        p1 = await begin(f"{topic}-1", offset("g", 0, 10), offset("g", 2, 10))
        await plain(offset("g", 2, 20))  # written after p1's record of g-2, before its marker
        await end(f"{topic}-1", *p1, commit=True)
        p2 = await begin(f"{topic}-2", offset("g", 1, 30))
        await end(f"{topic}-2", *p2, commit=False)
        p3 = await begin(f"{topic}-3", offset("g", 1, 40))
        await plain(offset("g", 1, 50))  # newer than p3's, which is still open
        p4 = await begin(f"{topic}-4", offset("g", 0, 60))
        p5 = await begin(f"{topic}-5", offset("g", 3, 70))
        await plain(offset("g", 3, None))  # drops p5's pending offset
        state = await check()
        assert {p: v["offset"] for p, v in state["offsets"]["g"]["orders"].items()} == {0: 10, 1: 50, 2: 20}
        assert set(state["pending"]) == {p3[0], p4[0]}
        await end(f"{topic}-3", *p3, commit=True)
        await end(f"{topic}-4", *p4, commit=True)
        await end(f"{topic}-5", *p5, commit=True)
        state = await check()
        assert {p: v["offset"] for p, v in state["offsets"]["g"]["orders"].items()} == {0: 60, 1: 50, 2: 20}
        assert state["pending"] == {}
    finally:
        await storage.close()


async def test_a_second_kcoord_fences_the_first(broker: Upstream) -> None:
    """Owner A writes; B takes the shard over (InitProducerId + fence batch) and loads; A is rejected from then on."""
    topic = new_topic()
    a = make_storage(broker, topic)
    await a.open(2)
    await a.shard_log(0).append([offset("g", 0, 1)])
    await a.shard_log(1).append([offset("h", 0, 1)])

    b = make_storage(broker, topic)
    await b.open(2)
    try:
        assert await read_all(b, 0) == [
            offset("g", 0, 1)
        ]  # B's load sees everything A wrote before the fence
        with pytest.raises(FencedError, match="another kcoord took over"):
            await a.shard_log(0).append([offset("g", 0, 2)])  # the zombie's write is rejected by the broker
        with pytest.raises(FencedError):  # and A stays fenced: it does not take the shard back on reload
            await read_all(a, 0)
        with pytest.raises(FencedError):
            await a.shard_log(0).append([offset("g", 0, 3)])
        await a.shard_log(1).append([offset("h", 0, 2)])  # shard 1 was not taken over: A still owns it
        await b.shard_log(0).append([offset("g", 0, 4)])
        assert await read_all(b, 0) == [offset("g", 0, 4)]
    finally:
        await a.close()
        await b.close()


async def test_the_tail_check_finds_a_new_owner_without_a_write(broker: Upstream) -> None:
    """A never writes after B takes over; its tail check reads B's fence and fences A (and tells
    the runtime through on_lost), while B's own check finds nothing foreign."""
    topic = new_topic()
    a = make_storage(broker, topic)
    await a.open(1)
    await read_all(a, 0)
    await a.shard_log(0).append([offset("g", 0, 1)])
    lost: list[Exception] = []
    a.shard_log(0).on_lost = lost.append
    assert await a.shard_log(0).check_tail() is None and a.shard_log(0).serving

    b = make_storage(broker, topic)
    await b.open(1)
    try:
        await read_all(b, 0)
        await b.shard_log(0).append([offset("g", 0, 2)])
        assert await b.shard_log(0).check_tail() is None and b.shard_log(0).serving
        found = await a.shard_log(0).check_tail()
        assert found is not None and "epoch 1" in found
        assert (
            isinstance(a.shard_log(0).fenced, FencedError)
            and len(lost) == 1
            and lost[0] is a.shard_log(0).fenced
        )
        await a.shard_log(0).refresh_ownership()  # the periodic refresh leaves a fenced shard alone
        await b.shard_log(0).append([offset("g", 0, 3)])  # B was not fenced back
        assert await read_all(b, 0) == [offset("g", 0, 3)]
    finally:
        await a.close()
        await b.close()


async def test_an_owner_found_after_the_refresh_bump_means_a_reload(broker: Upstream) -> None:
    """B took the shard between A's last check and A's epoch bump: A now owns it again, but its
    state misses B's writes, so the log is lost to A until it reloads (and the reload sees them)."""
    topic = new_topic()
    a = make_storage(broker, topic)
    await a.open(1)
    await read_all(a, 0)
    await a.shard_log(0).append([offset("g", 0, 1)])
    b = make_storage(broker, topic)
    await b.open(1)
    try:
        await read_all(b, 0)
        await b.shard_log(0).append([offset("g", 0, 2)])
        log_a = a.shard_log(0)
        async with log_a.ownership.lock:  # the bump of a refresh whose first tail check came before B
            await log_a.ownership.take()
        assert await log_a.check_tail() is not None
        assert log_a.lost is not None and log_a.fenced is None
        with pytest.raises(StorageError, match="was lost"):
            await log_a.append([offset("g", 0, 9)])
        assert await read_all(a, 0) == [offset("g", 0, 2)]  # reloaded: B's write is in A's state now
        assert log_a.serving
    finally:
        await a.close()
        await b.close()


async def test_a_write_acknowledged_below_the_loaded_end_is_not_acknowledged(broker: Upstream) -> None:
    """tansu acknowledges a Produce to a deleted topic at offset 0: the write went nowhere. Apache
    Kafka refuses it (UNKNOWN_TOPIC_OR_PARTITION) and Metadata says the topic is gone. Either way
    the log is lost, at once."""
    from kafka.admin import KafkaAdminClient

    topic = new_topic()
    a = make_storage(broker, topic)
    await a.open(1)
    await read_all(a, 0)
    for i in range(3):
        await a.shard_log(0).append([offset("g", 0, i)])
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.delete_topics([topic])
    finally:
        admin.close()
    # Kafka's DeleteTopics answers once the controller decided; the broker drops the partition a
    # moment later and acknowledges a Produce until then (into a log about to go): wait for that.
    deadline = time.monotonic() + 10
    while not await a.topic_gone():
        assert time.monotonic() < deadline, "the deleted topic is still in the cluster's metadata"
        await asyncio.sleep(0.05)
    try:
        with pytest.raises(StorageError, match="was lost"):
            await a.shard_log(0).append([offset("g", 0, 9)])
        assert a.shard_log(0).lost is not None and not a.shard_log(0).serving
    finally:
        await a.close()


async def test_fencing_is_enforced_at_the_partition_after_the_fence_batch(broker: Upstream) -> None:
    """The Kafka mechanism: once the new epoch is written at the partition, the old epoch is refused.

    On tansu the refusal already starts at InitProducerId; this checks the part Apache Kafka
    relies on — after the fence batch, a produce at the old epoch gets PRODUCER_FENCED or
    INVALID_PRODUCER_EPOCH — by sending the zombie's batch by hand.
    """
    topic = new_topic()
    a = make_storage(broker, topic)
    await a.open(1)
    log_a = a.shard_log(0)
    await log_a.append([offset("g", 0, 1)])
    old_pid, old_epoch, old_seq = log_a.producer_id, log_a.producer_epoch, log_a.sequence
    b = make_storage(broker, topic)
    await b.open(1)
    try:
        await read_all(b, 0)  # takes ownership
        log_b = b.shard_log(0)
        assert (log_b.producer_id, log_b.producer_epoch) == (old_pid, old_epoch + 1)
        batch = encode_batch(
            [(b"\x00\x01zombie", b"\x00\x03x")],
            timestamp=int(time.time() * 1000),
            producer_id=old_pid,
            producer_epoch=old_epoch,
            base_sequence=old_seq,
        )
        produce = sm.ProduceRequest(
            acks=-1,
            timeout_ms=5000,
            topic_data=[
                sm.ProduceRequest.TopicProduceData(
                    name=topic,
                    partition_data=[sm.ProduceRequest.PartitionProduceData(index=0, records=batch)],
                )
            ],
        )
        resp = await request(b, produce)
        assert resp.responses[0].partition_responses[0].error_code in (47, 90)  # type: ignore[attr-defined]
    finally:
        await a.close()
        await b.close()


async def test_unreachable_cluster_is_a_storage_error() -> None:
    from support.ports import free_port

    storage = KafkaStorage([("127.0.0.1", free_port())], Settings(storage="kafka"), request_timeout=2.0)
    with pytest.raises(StorageError, match="no broker reachable"):
        await storage.open(1)
    await storage.close()


async def test_lost_produce_response_is_retried_without_duplicates(broker: Upstream) -> None:
    """The broker wrote the batch but the ack was lost: the retry reuses the sequence, the broker dedups it."""
    storage = make_storage(broker, new_topic())
    await storage.open(1)
    log = storage.shard_log(0)
    await log.append([offset("g", 0, 1)])
    real_leader = storage.cluster.leader
    lost = []

    class LosesFirstAck:
        def __init__(self, conn: object) -> None:
            self.conn = conn

        name = "loses-first-ack"

        def request(self, body: object, *, timeout: float) -> asyncio.Future[object]:
            # A future, as Connection.request returns (the produce path adds a callback to it).
            return asyncio.ensure_future(self._request(body, timeout))

        def flush(self) -> None:
            self.conn.flush()  # type: ignore[attr-defined]

        async def _request(self, body: object, timeout: float) -> object:
            resp = await self.conn.request(body, timeout=timeout)  # type: ignore[attr-defined]
            if isinstance(body, sm.ProduceRequest) and not lost:
                lost.append(resp)
                raise StorageError("simulated: connection lost before the response")
            return resp

    async def leader(partition: int) -> object:
        return LosesFirstAck(await real_leader(partition))

    storage.cluster.leader = leader  # type: ignore[method-assign]
    try:
        await log.append([offset("g", 1, 2), offset("g", 2, 3)])
        assert lost, "the first produce's response was dropped"
        storage.cluster.leader = real_leader  # type: ignore[method-assign]
        await log.append([offset("g", 3, 4)])  # the sequence continues after the deduplicated batch
        fetched = await log.read_latest()
        assert len(fetched) == 4
        high_watermark = (await log.reads.fetch(0))[1]
        assert high_watermark == 1 + 1 + 2 + 1  # fence + first append + one copy of the retried batch + last
    finally:
        await storage.close()


async def send_all(log: KafkaShardLog, appends: list[list[Record]]) -> list[StorageError | None]:
    """Each append sent in a loop iteration of its own (so in a Produce request of its own) without
    waiting for the one before; the outcome of each, once all are answered."""
    outcomes: list[StorageError | None] = [None] * len(appends)
    answered = [asyncio.get_running_loop().create_future() for _ in appends]

    def done(i: int) -> Callable[[StorageError | None], None]:
        def settle(error: StorageError | None) -> None:
            outcomes[i] = error
            answered[i].set_result(None)

        return settle

    for i, records in enumerate(appends):
        await log.send(records, done(i))
        await asyncio.sleep(0)
    await asyncio.wait_for(asyncio.gather(*answered), 30)
    return outcomes


async def test_pipelined_appends_land_in_the_order_they_were_sent(broker: Upstream) -> None:
    """Six batches in flight at once, each with the sequence after the one before: the log
    holds them in send order, one each (later values of one key win, as replay needs)."""
    storage = make_storage(broker, new_topic())
    oracle = MemoryStorage(compacted_reads=True)
    await storage.open(1)
    await oracle.open(1)
    appends = [[offset("g", 0, i), offset("g", i % 3 + 1, i)] for i in range(5)] + [[group("g", 1)]]
    try:
        log = storage.shard_log(0)
        await log.append([offset("g", 0, 100)])  # owned and loaded
        assert await send_all(log, appends) == [None] * len(appends)
        assert log.ownership.in_flight == 0
        for records in [[offset("g", 0, 100)], *appends]:
            await oracle.shard_log(0).append(records)
        records, high_watermark = await log.reads.fetch(0)
        batches = [b for b in decode_batches(records or b"")]
        assert [len(b.records) for b in batches] == [1, 1, 2, 2, 2, 2, 2, 1]  # fence, first, the six
        assert [b.base_sequence for b in batches[2:]] == [2, 4, 6, 8, 10, 12]
        assert high_watermark == 13
        assert await read_all(storage, 0) == await read_all(oracle, 0)
    finally:
        await storage.close()


async def test_the_broker_refuses_a_pipelined_batch_whose_predecessor_is_missing(broker: Upstream) -> None:
    """The first of two batches in flight never reaches the broker (its request fails before it is
    sent): the broker refuses the second for the sequence gap, so the log never holds a later
    append without an earlier one; both fail, and the shard re-fences and reads neither."""
    storage = make_storage(broker, new_topic())
    await storage.open(1)
    log = storage.shard_log(0)
    await log.append([offset("g", 0, 1)])
    real_leader = storage.cluster.leader
    dropped: list[object] = []

    class DropsFirstProduce:
        name = "drops-first-produce"

        def __init__(self, conn: object) -> None:
            self.conn = conn

        def request(self, body: object, *, timeout: float) -> asyncio.Future[object]:
            if isinstance(body, sm.ProduceRequest) and not dropped:
                dropped.append(body)
                failed: asyncio.Future[object] = asyncio.get_running_loop().create_future()
                asyncio.get_running_loop().call_later(
                    0.3, failed.set_exception, StorageError("simulated: not sent")
                )
                return failed
            return self.conn.request(body, timeout=timeout)  # type: ignore[attr-defined,no-any-return]

        def flush(self) -> None:
            self.conn.flush()  # type: ignore[attr-defined]

    async def leader(partition: int) -> object:
        return DropsFirstProduce(await real_leader(partition))

    storage.cluster.leader = leader  # type: ignore[method-assign]
    try:
        first, second = await send_all(log, [[offset("g", 0, 2)], [offset("g", 0, 3)]])
        assert dropped
        assert isinstance(first, StorageError) and "not sent" in str(first)
        assert isinstance(second, StorageError) and f"error {ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER}" in str(
            second
        )
        assert not log.ownership.owned and log.fenced is None
        storage.cluster.leader = real_leader  # type: ignore[method-assign]
        assert await read_all(storage, 0) == [offset("g", 0, 1)]  # re-fenced; neither landed
        await log.append([offset("g", 0, 4)])
        assert await read_all(storage, 0) == [offset("g", 0, 4)]
    finally:
        await storage.close()
