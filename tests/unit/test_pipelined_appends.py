"""A shard's appends pipelined to its partition (kcoord.storage.writer.ShardWriter.send): sent in
order with consecutive sequences, retried only while alone in flight, a failure with others in
flight not retried, and taking ownership (a new epoch) only once none is in flight.

The broker here is a fake that answers when the test says; the broker's own sequence checks
(a gap is refused) are what the integration tests run against tansu and Kafka."""

from __future__ import annotations

import asyncio
from typing import Any

from kcoord.protocol import storage_messages as sm
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.record_batch import decode_batches
from kcoord.storage.base import FencedError, StorageError
from kcoord.storage.ownership import Ownership
from kcoord.storage.position import LogPosition
from kcoord.storage.writer import ProduceCombiner, ShardWriter

R = sm.ProduceResponse


class ScriptedBroker:
    """Holds every Produce request until the test answers it."""

    name = "scripted-broker"

    def __init__(self) -> None:
        self.requests: list[Any] = []
        self.answers: list[asyncio.Future[Any]] = []

    def request(self, req: Any, timeout: float) -> asyncio.Future[Any]:
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.requests.append(req)
        self.answers.append(answer)
        return answer

    def flush(self) -> None:
        pass

    def batch(self, i: int) -> bytes:
        [topic] = self.requests[i].topic_data
        [part] = topic.partition_data
        return bytes(part.records)

    def sequence(self, i: int) -> int:
        return int(decode_batches(self.batch(i))[0].base_sequence)

    def answer(self, i: int, base_offset: int, error: int = ErrorCode.NONE) -> None:
        part = R.PartitionProduceResponse(index=0, error_code=error, base_offset=base_offset)
        self.answers[i].set_result(
            R(responses=[R.TopicProduceResponse(name="t", partition_responses=[part])])
        )

    def drop(self, i: int) -> None:
        self.answers[i].set_exception(ConnectionResetError("connection lost"))


class FakeCluster:
    def __init__(self, broker: ScriptedBroker) -> None:
        self.broker = broker

    async def leader(self, partition: int) -> ScriptedBroker:
        return self.broker

    async def refresh(self, topic: str) -> None:
        pass


def make_writer() -> tuple[ShardWriter, Ownership, ScriptedBroker, LogPosition]:
    broker = ScriptedBroker()
    cluster: Any = FakeCluster(broker)
    position = LogPosition()
    position.loaded(0, 0, 0)
    own = Ownership(cluster, "t", 0, position, reads=None, init_timeout=1.0, request_timeout=1.0)  # type: ignore[arg-type]
    own.producer_id, own.producer_epoch, own.owned = 7, 1, True
    own.own_producers.add((7, 1))

    async def not_gone() -> str:
        return ""

    writer = ShardWriter(
        cluster,
        "t",
        0,
        ProduceCombiner("t", timeout=1.0),
        own,
        position,
        append_timeout=1.0,
        max_batch_bytes=lambda: 1 << 20,
        topic_gone=not_gone,
    )
    own.write_fence = writer.produce_own
    return writer, own, broker, position


def pairs(n: int) -> list[tuple[bytes, bytes | None]]:
    return [(b"k%d" % i, b"v") for i in range(n)]


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


class Done:
    def __init__(self) -> None:
        self.results: list[StorageError | None] = []

    def __call__(self, error: StorageError | None) -> None:
        self.results.append(error)


async def test_batches_go_out_behind_each_other_with_consecutive_sequences() -> None:
    writer, own, broker, position = make_writer()
    done = [Done(), Done(), Done()]
    for n, d in zip([1, 2, 1], done, strict=True):
        await writer.send(pairs(n), d)  # returns once sent, not once acknowledged
        await settle()
    assert [broker.sequence(i) for i in range(3)] == [0, 1, 3]
    assert own.sequence == 4 and own.in_flight == 3
    for i, offset in enumerate([0, 1, 3]):
        broker.answer(i, offset)
    await settle()
    assert [d.results for d in done] == [[None], [None], [None]]
    assert own.in_flight == 0 and position.log_end == 4


async def test_two_batches_of_one_partition_in_one_iteration_go_in_two_requests_in_order() -> None:
    combiner = ProduceCombiner("t", timeout=1.0)
    broker: Any = ScriptedBroker()
    answers: list[tuple[bytes, Any]] = []
    combiner.enqueue(broker, 0, b"first", lambda part, failure: answers.append((b"first", part.base_offset)))
    combiner.enqueue(
        broker, 0, b"second", lambda part, failure: answers.append((b"second", part.base_offset))
    )
    await settle()
    assert [bytes(r.topic_data[0].partition_data[0].records) for r in broker.requests] == [
        b"first",
        b"second",
    ]
    broker.answer(1, 7)
    broker.answer(0, 5)
    await settle()
    assert answers == [(b"second", 7), (b"first", 5)]  # each its own request's answer


async def test_a_failed_attempt_with_others_in_flight_is_not_retried() -> None:
    writer, own, broker, _ = make_writer()
    first, second = Done(), Done()
    await writer.send(pairs(1), first)
    await settle()
    await writer.send(pairs(1), second)
    await settle()
    broker.answer(0, -1, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    broker.answer(1, -1, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)  # the broker refuses a gap
    await settle()
    assert isinstance(first.results[0], StorageError) and isinstance(second.results[0], StorageError)
    assert len(broker.requests) == 2  # no resend
    assert not own.owned and own.fenced is None and own.in_flight == 0


async def test_an_epoch_error_fences_the_shard() -> None:
    writer, own, broker, _ = make_writer()
    done = Done()
    await writer.send(pairs(1), done)
    await settle()
    broker.answer(0, -1, ErrorCode.INVALID_PRODUCER_EPOCH)
    await settle()
    assert isinstance(done.results[0], FencedError) and own.fenced is not None


async def test_the_only_batch_in_flight_is_resent_and_nothing_goes_out_behind_it() -> None:
    writer, own, broker, position = make_writer()
    first, second = Done(), Done()
    await writer.send(pairs(2), first)
    await settle()
    broker.drop(0)
    await settle()
    sending = asyncio.get_running_loop().create_task(writer.send(pairs(1), second))
    for _ in range(50):
        await asyncio.sleep(0.005)
        if len(broker.requests) > 1:
            break
    assert len(broker.requests) == 2 and broker.batch(1) == broker.batch(0)  # the same batch again
    assert own.retrying and not sending.done()
    broker.answer(1, 0)
    await sending
    await settle()
    assert first.results == [None] and own.owned
    assert len(broker.requests) == 3 and broker.sequence(2) == 2
    broker.answer(2, 2)
    await settle()
    assert second.results == [None] and position.log_end == 3


async def test_taking_ownership_waits_until_no_batch_is_in_flight() -> None:
    """A batch at the old epoch answered after the bump would look like another owner's fence."""
    writer, own, broker, _ = make_writer()

    async def bump() -> tuple[int, int]:
        return 7, 2

    own._init_producer_id = bump  # type: ignore[method-assign]
    done = Done()
    await writer.send(pairs(1), done)
    await settle()
    own.owned = False  # as after a failure: the next write takes ownership again

    async def take() -> None:
        async with own.lock:
            await own.take()

    taking = asyncio.get_running_loop().create_task(take())
    await settle()
    assert own.producer_epoch == 1 and len(broker.requests) == 1
    broker.answer(0, 0)
    await settle()
    assert done.results == [None]
    assert own.producer_epoch == 2 and len(broker.requests) == 2  # the fence batch, sequence 0
    assert broker.sequence(1) == 0
    broker.answer(1, 1)
    await taking
    assert own.owned and own.sequence == 1


async def test_a_load_reads_only_once_no_batch_is_in_flight() -> None:
    """A batch sent before a reload (its shard's generation failed meanwhile) lands before the
    load reads, never after it: the loaded state is the log's."""
    writer, own, broker, _ = make_writer()
    done = Done()
    await writer.send(pairs(1), done)
    await settle()
    rechecked: list[bool] = []

    async def recheck() -> None:
        rechecked.append(True)

    loading = asyncio.get_running_loop().create_task(own.ready_to_load(recheck))
    await settle()
    assert not loading.done()
    broker.answer(0, 0)
    await loading
    assert done.results == [None] and own.owned and len(broker.requests) == 1
