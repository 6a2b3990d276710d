"""ListOffsets LATEST corrected from the Fetch high watermark, for upstreams that answer it wrongly.

tansu 0.6 answers ListOffsets LATEST with the base offset of a partition's last batch + 1, which
is short of the log end whenever that batch holds more than one record (docs/tansu.md). Clients
use that answer for lag (``kafka-consumer-groups.sh``, ``kcoord groups describe``), for
``auto.offset.reset=latest`` (a new consumer would re-read the end of the last batch) and for
``seekToEnd``. Fetch's ``high_watermark`` is right on tansu, so for an upstream known to have the
bug (``upstream.latest.offset.from.fetch``; the embedded broker is one) kcoord reads the
LATEST partitions of a relayed ListOffsets, asks a Fetch for their high watermarks, and answers
the larger of the two. Any other timestamp, and any other upstream, is relayed as it came.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from kcoord.protocol import storage_messages as sm
from kcoord.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from kcoord.client import Connection

LATEST_TIMESTAMP = -1
Partition = tuple[str, int]
# Partition -> its LATEST answer in, partition -> its high watermark out.
HighWatermarks = Callable[[dict[Partition, int]], Awaitable[dict[Partition, int]]]
# Fetch v12 is the last that names topics (v13+ by id); every upstream speaks one at or below it.
FETCH_BY_NAME_UNTIL = 12


def latest_partitions(payload: bytes, version: int) -> list[Partition]:
    """The partitions a ListOffsets request frame asks LATEST for; [] for a version kcoord does
    not read (it is then relayed as it came)."""
    if version not in sm.ListOffsetsRequest.SCHEMA.valid:
        return []
    request = sm.decode_request(sm.ListOffsetsRequest, version, payload)
    return [
        (topic.name, p.partition_index)
        for topic in request.topics
        for p in topic.partitions
        if p.timestamp == LATEST_TIMESTAMP
    ]


async def corrected(
    raw: bytes, version: int, wanted: list[Partition], high_watermarks: HighWatermarks
) -> bytes:
    """The answer frame ``raw`` (no size prefix) with each LATEST offset raised to its partition's
    high watermark; returned whole, size prefix included."""
    correlation_id, response = sm.decode_response(sm.ListOffsetsResponse, version, raw)
    wanted_set = set(wanted)
    answered = {
        (topic.name, p.partition_index): int(p.offset)
        for topic in response.topics
        for p in topic.partitions
        if p.error_code == ErrorCode.NONE and (topic.name, p.partition_index) in wanted_set
    }
    if answered:
        marks = await high_watermarks(answered)
        for topic in response.topics:
            for p in topic.partitions:
                mark = marks.get((topic.name, p.partition_index))
                if mark is not None and p.error_code == ErrorCode.NONE and mark > p.offset:
                    p.offset = mark
    return sm.encode_response(version, correlation_id, response)


def fetch_for_high_watermarks(offsets: dict[Partition, int]) -> Any:
    """A Fetch that reads next to nothing (1 byte per partition, 1 ms wait: tansu answers a
    zero-wait Fetch with no partitions) from each partition's LATEST answer, for its high watermark."""
    F = sm.FetchRequest
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(
            F.FetchPartition(partition=partition, fetch_offset=max(0, offset), partition_max_bytes=1)
        )
    return F(
        replica_id=-1,
        max_wait_ms=1,
        min_bytes=1,
        max_bytes=1,
        isolation_level=0,
        topics=[F.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
    )


async def high_watermarks(
    conn: Connection, offsets: dict[Partition, int], timeout: float
) -> dict[Partition, int]:
    """Each partition's high watermark from one Fetch on ``conn`` (tansu: a single broker, the
    leader of every partition); a partition answered with an error is left out."""
    version = conn.version_for(sm.FetchRequest, FETCH_BY_NAME_UNTIL)
    response = await conn.request(fetch_for_high_watermarks(offsets), version, timeout=timeout)
    return {
        (topic.topic, p.partition_index): int(p.high_watermark)
        for topic in response.responses
        for p in topic.partitions
        if p.error_code == ErrorCode.NONE
    }
