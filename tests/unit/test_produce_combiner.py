"""Appends of many shards in one loop iteration leave as one Produce request per broker, and each
shard gets its own partition's answer (kcoord.storage.kafka.ProduceCombiner)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kcoord.client import ConnectionLost
from kcoord.protocol import storage_messages as sm
from kcoord.storage.base import StorageError
from kcoord.storage.kafka import ProduceCombiner

R = sm.ProduceResponse


class FakeBroker:
    """Answers each Produce with a per-partition error chosen by the test (or fails the request)."""

    name = "fake-broker"

    def __init__(self, errors: dict[int, int] | None = None, fail: BaseException | None = None) -> None:
        self.requests: list[Any] = []
        self.errors = errors or {}
        self.fail = fail
        self.flushes = 0  # the combiner writes its request at once, not at the end of the iteration

    def request(self, req: Any, timeout: float) -> asyncio.Future[Any]:
        """The answer comes in a later loop iteration, as from a socket."""
        self.requests.append(req)
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(self._answer, req, answer)
        return answer

    def flush(self) -> None:
        self.flushes += 1

    def _answer(self, req: Any, answer: asyncio.Future[Any]) -> None:
        if self.fail is not None:
            answer.set_exception(self.fail)
            return
        parts = [p.index for t in req.topic_data for p in t.partition_data]
        answer.set_result(
            R(
                responses=[
                    R.TopicProduceResponse(
                        name="t",
                        partition_responses=[
                            R.PartitionProduceResponse(
                                index=p, error_code=self.errors.get(p, 0), base_offset=10 * p
                            )
                            for p in parts
                        ],
                    )
                ]
            )
        )


async def test_one_request_per_broker_per_iteration_and_answers_by_partition() -> None:
    combiner = ProduceCombiner("t", timeout=5.0)
    a, b = FakeBroker(errors={3: 47}), FakeBroker()
    answers = await asyncio.gather(
        combiner.produce(a, 1, b"batch-1"),
        combiner.produce(a, 3, b"batch-3"),
        combiner.produce(b, 2, b"batch-2"),
        combiner.produce(a, 5, b"batch-5"),
    )
    assert [(p.index, p.error_code, p.base_offset) for p in answers] == [
        (1, 0, 10),
        (3, 47, 30),
        (2, 0, 20),
        (5, 0, 50),
    ]
    assert len(a.requests) == 1 and len(b.requests) == 1
    [topic] = a.requests[0].topic_data
    assert topic.name == "t"
    assert [(p.index, p.records) for p in topic.partition_data] == [
        (1, b"batch-1"),
        (3, b"batch-3"),
        (5, b"batch-5"),
    ]
    assert a.requests[0].acks == -1
    assert a.flushes == 1 and b.flushes == 1


async def test_a_later_iteration_gets_its_own_request() -> None:
    combiner = ProduceCombiner("t", timeout=5.0)
    broker = FakeBroker()
    await combiner.produce(broker, 0, b"x")
    await combiner.produce(broker, 0, b"y")
    assert len(broker.requests) == 2


async def test_requests_are_split_at_the_byte_cap() -> None:
    combiner = ProduceCombiner("t", timeout=5.0, max_request_bytes=10)
    broker = FakeBroker()
    await asyncio.gather(*(combiner.produce(broker, p, b"123456") for p in range(3)))
    assert [len(r.topic_data[0].partition_data) for r in broker.requests] == [1, 1, 1]


async def test_a_failed_request_fails_every_batch_in_it_with_storage_error() -> None:
    combiner = ProduceCombiner("t", timeout=5.0)
    broker = FakeBroker(fail=ConnectionResetError("gone"))
    results = await asyncio.gather(
        combiner.produce(broker, 0, b"x"), combiner.produce(broker, 1, b"y"), return_exceptions=True
    )
    assert all(isinstance(r, StorageError) and "fake-broker lost: gone" in str(r) for r in results)
    with pytest.raises(StorageError):
        await combiner.produce(FakeBroker(fail=StorageError("timed out")), 0, b"z")


async def test_a_closed_connection_fails_every_batch_at_once() -> None:
    """The request is sent from a plain callback: a connection that refuses it synchronously
    (closed) must still answer every queued batch, with a StorageError."""

    class Closed(FakeBroker):
        def request(self, req: Any, timeout: float) -> asyncio.Future[Any]:
            raise ConnectionLost("connection to fake-broker is closed")

    combiner = ProduceCombiner("t", timeout=5.0)
    results = await asyncio.gather(
        combiner.produce(Closed(), 0, b"x"), combiner.produce(Closed(), 1, b"y"), return_exceptions=True
    )
    assert all(isinstance(r, StorageError) and "is closed" in str(r) for r in results)


async def test_an_unexpected_failure_while_sending_still_answers_every_batch() -> None:
    """Sending runs as a loop callback: a bug there must fail the batches, not leave them waiting."""

    class Broken(FakeBroker):
        def flush(self) -> None:
            raise RuntimeError("bug")

    combiner = ProduceCombiner("t", timeout=5.0)
    broker = Broken()
    results = await asyncio.wait_for(
        asyncio.gather(
            combiner.produce(broker, 0, b"x"), combiner.produce(broker, 1, b"y"), return_exceptions=True
        ),
        timeout=5,
    )
    assert all(isinstance(r, StorageError) and "bug" in str(r) for r in results)
