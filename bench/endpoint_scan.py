"""What the KIP-951 endpoint check adds to each relayed Produce and Fetch answer.

    .venv/bin/python -m bench.endpoint_scan

kcoord relays Produce (v10+) and Fetch (v16+) answers unchanged unless they carry leader
endpoints, which must be rewritten (protocol/endpoints.py). Deciding that means walking to the
answer's root tagged fields, behind every partition. This bench times that check on Fetch v17
and Produce v11 answers of several shapes, side by side in one process with a full decode of the
same bytes (what the check would cost without the C skip walk), as process CPU time, best of 7.
Write the printed table into bench/RESULTS.md under "## Relayed answers: the endpoint check".
"""

from __future__ import annotations

import time
import timeit
import uuid
from collections.abc import Callable
from functools import partial

from kcoord.protocol import codegen, frames
from kcoord.protocol import messages as m
from kcoord.protocol.endpoints import carries_node_endpoints
from kcoord.protocol.messages import ApiKey


def fetch_answer(topics: int, partitions: int, record_bytes: int) -> bytes:
    R = m.FetchResponse
    resp = R(responses=[
        R.FetchableTopicResponse(topic_id=uuid.UUID(int=t + 1), partitions=[
            R.PartitionData(partition_index=p, high_watermark=1000, records=b"r" * record_bytes)
            for p in range(partitions)])
        for t in range(topics)])  # fmt: skip
    return frames.encode_response(ApiKey.FETCH, 17, 7, resp)[4:]


def produce_answer(partitions: int) -> bytes:
    R = m.ProduceResponse
    resp = R(responses=[R.TopicProduceResponse(name="topic", partition_responses=[
        R.PartitionProduceResponse(index=p, base_offset=100) for p in range(partitions)])])  # fmt: skip
    return frames.encode_response(ApiKey.PRODUCE, 11, 7, resp)[4:]


def best_us(fn: Callable[[], object], number: int) -> float:
    timer = timeit.Timer(fn, timer=time.process_time)
    return min(timer.repeat(repeat=7, number=number)) / number * 1e6


def main() -> None:
    cases = [
        ("Fetch v17, 1 partition, 1 KiB", ApiKey.FETCH, 17, fetch_answer(1, 1, 1024)),
        ("Fetch v17, 10 partitions x 64 KiB", ApiKey.FETCH, 17, fetch_answer(1, 10, 65536)),
        ("Fetch v17, 5 topics x 20 partitions, 10 KiB", ApiKey.FETCH, 17, fetch_answer(5, 20, 10240)),
        ("Produce v11, 3 partitions", ApiKey.PRODUCE, 11, produce_answer(3)),
        ("Produce v11, 50 partitions", ApiKey.PRODUCE, 11, produce_answer(50)),
    ]
    print(f"decoder backend: {codegen.DECODER_BACKEND}")
    print("| answer | bytes | endpoint check µs | full decode µs | decode / check |")
    print("|---|---|---|---|---|")
    for name, api_key, version, raw in cases:
        number = 2000 if len(raw) < 100_000 else 200
        check = best_us(partial(carries_node_endpoints, api_key, version, raw), number)
        decode = best_us(partial(frames.decode_response, api_key, version, raw), number)
        print(f"| {name} | {len(raw):,} | {check:.2f} | {decode:.2f} | {decode / check:.0f}x |")


if __name__ == "__main__":
    main()
