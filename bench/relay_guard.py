"""What the guard of kcoord's internal topics adds to each relayed Produce request.

    .venv/bin/python -m bench.relay_guard

Every relayed Produce is checked for a protected topic (coordinator/net/relay/guard.py) by walking
its topic names and skipping each partition's records by their length, and its transactional id
compared in place with the shards' own. This bench times that
check on Produce requests of several shapes, beside what the relay already read of every Produce
before (its acks: ``request_body_start`` + ``produce_acks``) and a full decode of the same bytes
(what the check would cost if it decoded), as process CPU time, best of 7 runs, in one process.
The request path end to end (sockets, tansu) is ``bench.relay``'s small-request figure.
Write the printed table into bench/RESULTS.md under "## Relay: the internal-topic guard".
"""

from __future__ import annotations

import time
import timeit
from collections.abc import Callable
from functools import partial

from kcoord.coordinator.net.relay import guard
from kcoord.coordinator.net.relay.requests import produce_acks, request_body_start
from kcoord.protocol import codec, frames
from kcoord.protocol import messages as m
from kcoord.protocol.messages import ApiKey

PROTECTED = guard.ProtectedTopics(
    frozenset({"__kcoord_offsets", "__kcoord_events"}), transactional_id_prefix="kcoord:__kcoord_offsets:"
)


def produce_request(
    version: int, topics: int, partitions: int, record_bytes: int, transactional: bool = False
) -> bytes:
    R = m.ProduceRequest
    request = R(transactional_id="my-app-txn" if transactional else None, acks=1, timeout_ms=30000, topic_data=[
        R.TopicProduceData(name=f"topic-{t}", partition_data=[
            R.PartitionProduceData(index=p, records=b"r" * record_bytes) for p in range(partitions)])
        for t in range(topics)])  # fmt: skip
    return frames.encode_request(ApiKey.PRODUCE, version, 7, "bench", request)[4:]


def acks_only(version: int, payload: bytes) -> object:
    return produce_acks(payload, request_body_start(payload, flexible=version >= 9), version)


def best_us(fn: Callable[[], object], number: int) -> float:
    timer = timeit.Timer(fn, timer=time.process_time)
    return min(timer.repeat(repeat=7, number=number)) / number * 1e6


def main() -> None:
    cases = [
        ("Produce v9, 1 partition, 100 B", 9, produce_request(9, 1, 1, 100)),
        ("Produce v3, 1 partition, 100 B", 3, produce_request(3, 1, 1, 100)),
        (
            "Produce v9, 1 partition, 100 B, transactional",
            9,
            produce_request(9, 1, 1, 100, transactional=True),
        ),
        ("Produce v12, 1 partition, 1 MiB", 12, produce_request(12, 1, 1, 1 << 20)),
        ("Produce v12, 5 topics x 10 partitions, 16 KiB", 12, produce_request(12, 5, 10, 16384)),
        ("Produce v8, 5 topics x 10 partitions, 16 KiB", 8, produce_request(8, 5, 10, 16384)),
    ]
    print(f"decoder backend: {codec.DECODER_BACKEND}")
    print("| request | bytes | acks read (before) µs | guard check µs | full decode µs |")
    print("|---|---|---|---|---|")
    for name, version, payload in cases:
        assert guard.check(ApiKey.PRODUCE, version, payload, PROTECTED) is None
        number = 20000
        before = best_us(partial(acks_only, version, payload), number)
        check = best_us(partial(guard.check, ApiKey.PRODUCE, version, payload, PROTECTED), number)
        decode = best_us(partial(frames.decode_request_body, payload, ApiKey.PRODUCE, version), number // 10)
        print(f"| {name} | {len(payload):,} | {before:.2f} | {check:.2f} | {decode:.2f} |")


if __name__ == "__main__":
    main()
