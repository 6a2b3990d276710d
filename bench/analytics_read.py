"""The pipeline reading a real topic: synthetic events produced to a tansu broker, then
``kcoord analytics`` through kcoord's Python data source (one Spark task per topic partition),
against the same events from Parquet files.

    .venv/bin/python -m bench.analytics_read --events 1000000 [--partitions 6] [--master local[2]]

The events are the scale bench's (``bench.analytics_scale``), produced straight to the broker in
record batches of 5,000 (kcoord's own client), then the pipeline runs twice on them: from the topic
and from Parquet. The difference is the cost of reading the topic.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import zlib
from pathlib import Path

from bench.analytics_scale import _events, generate
from support.broker import pinned_tansu


async def produce(bootstrap: str, topic: str, partitions: int, values: list[bytes]) -> None:
    from kcoord.analytics.kafka_io import parse_bootstrap
    from kcoord.coordinator.ops.event_topic import EventTopicWriter

    writer = EventTopicWriter(parse_bootstrap(bootstrap), topic, partitions=partitions)
    assert await writer._ensure_topic()
    by_partition: dict[int, list[tuple[bytes, bytes]]] = {}
    for i, v in enumerate(values):
        key = f"group-{i % 2000}".encode()
        by_partition.setdefault(zlib.crc32(key) % partitions, []).append((key, v))
    for p, pairs in by_partition.items():
        for start in range(0, len(pairs), 5000):
            await writer._produce({p: pairs[start : start + 5000]})
    writer.cluster.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()
    from kcoord.analytics.run import run, spark_session

    work = Path(tempfile.mkdtemp(prefix="kcoord-analytics-read-"))
    values: list[bytes] = []
    gen: dict[str, int] = {}
    seed = 0
    while len(values) < args.events:
        values += _events(min(500_000, args.events - len(values)), seed, gen)
        seed += 1
    broker, address = pinned_tansu("tansu-analytics", None)
    try:
        t = time.monotonic()
        asyncio.run(produce(address, "__kcoord_events", args.partitions, values))
        print(f"produced {len(values):,} events in {time.monotonic() - t:.1f} s", flush=True)
        generate(args.events, work / "parquet")
        spark_session(args.master)  # started before the clock: both runs share it
        rows = {}
        for source in ("parquet", "topic"):
            started = time.monotonic()
            summary = run(
                argparse.Namespace(
                    bootstrap_server=address if source == "topic" else None,
                    out=str(work / f"out-{source}"),
                    since=None,
                    master=args.master,
                    events_topic="__kcoord_events",
                    offsets_topic="",
                    source="python",
                    input_parquet=str(work / "parquet") if source == "parquet" else None,
                    no_report=False,
                    lag_points=5,
                )
            )
            print(
                json.dumps(
                    {
                        "events": args.events,
                        "from": source,
                        "wall_seconds": round(time.monotonic() - started, 1),
                        "table_seconds": summary["table_seconds"],
                        "rows": summary["rows"],
                    }
                ),
                flush=True,
            )
            rows[source] = summary["rows"]
        print(
            "the same tables from the topic as from the files:", rows["topic"] == rows["parquet"], flush=True
        )
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
