"""A Spark 4 Python data source for Kafka topics (``pyspark.sql.datasource``), batch and streaming.

Used when Spark's own Kafka source (the ``spark-sql-kafka`` connector jar) is not on the classpath.
It reads through kcoord's Kafka client (:mod:`kcoord.analytics.kafka_io`), one Spark partition per
topic partition, and gives the columns Spark's Kafka source gives that the pipeline uses:
``topic, partition, offset, timestamp (ms), key, value``.

Options: ``bootstrap`` (HOST:PORT[,...]), ``topic``, ``since_ms`` (optional: start at the first
offset at or after this time instead of the beginning), ``start_offsets`` and ``end_offsets``
(optional, JSON ``{"partition": offset}``: where an incremental run starts, from its checkpoint, and
the end it fixed before reading; a partition not named starts at the beginning or ``since_ms``, and
reads to the end).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition

SCHEMA = "topic string, partition int, offset long, timestamp long, key binary, value binary"
NAME = "kcoord_kafka"


class TopicPartitionRange(InputPartition):
    def __init__(self, partition: int, start: int, end: int) -> None:
        super().__init__(partition)
        self.partition = partition
        self.start = start
        self.end = end


def _options(options: dict[str, str]) -> tuple[str, str, int | None]:
    since = options.get("since_ms")
    return options["bootstrap"], options["topic"], int(since) if since not in (None, "") else None


def _offsets_option(options: dict[str, str], name: str) -> dict[int, int]:
    text = options.get(name)
    return {int(p): int(o) for p, o in json.loads(text).items()} if text else {}


def _ranges(
    bootstrap: str,
    topic: str,
    since: int | None,
    start_offsets: dict[int, int] | None = None,
    end_offsets: dict[int, int] | None = None,
) -> list[TopicPartitionRange]:
    from kcoord.analytics import kafka_io

    parts = kafka_io.partitions(bootstrap, topic)
    if not parts:
        return []
    earliest = kafka_io.list_offsets(bootstrap, topic, dict.fromkeys(parts, kafka_io.EARLIEST))
    starts = dict(earliest)
    if since is not None:
        at = kafka_io.list_offsets(bootstrap, topic, dict.fromkeys(parts, since))
        starts = {p: (at[p] if at.get(p, -1) >= 0 else -1) for p in parts}
    for p, checkpointed in (start_offsets or {}).items():
        # from the checkpoint on; records that retention deleted since the last run are gone
        starts[p] = max(checkpointed, earliest.get(p, 0))
    ends = end_offsets or {}
    # End: unless fixed by the caller, read until a fetch brings nothing more (-1), not the listed
    # end offset: some brokers (tansu) list a wrong end offset for batches of several records
    # (docs/tansu.md).
    return [
        TopicPartitionRange(p, starts.get(p, 0), ends.get(p, -1))
        for p in parts
        if starts.get(p, 0) >= 0 and (p not in ends or ends[p] > starts.get(p, 0))
    ]


BATCH_ROWS = 20_000


def _read(bootstrap: str, topic: str, part: TopicPartitionRange) -> Iterator[Any]:
    """The partition's records as Arrow record batches (Spark 4 takes them without converting
    row by row)."""
    import pyarrow as pa

    from kcoord.analytics import kafka_io

    end = None if part.end < 0 else part.end
    names = ["topic", "partition", "offset", "timestamp", "key", "value"]

    def batch(rows: list[tuple[int, int, bytes | None, bytes | None]]) -> Any:
        offsets, stamps, keys, values = zip(*rows, strict=True)
        return pa.RecordBatch.from_arrays(
            [
                pa.array([topic] * len(rows), pa.string()),
                pa.array([part.partition] * len(rows), pa.int32()),
                pa.array(offsets, pa.int64()),
                pa.array(stamps, pa.int64()),
                pa.array(keys, pa.binary()),
                pa.array(values, pa.binary()),
            ],
            names=names,
        )

    rows: list[tuple[int, int, bytes | None, bytes | None]] = []
    for record in kafka_io.read_partition(bootstrap, topic, part.partition, part.start, end):
        rows.append(record)
        if len(rows) >= BATCH_ROWS:
            yield batch(rows)
            rows = []
    if rows:
        yield batch(rows)


class KafkaTopicDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return _BatchReader(dict(self.options))

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return _StreamReader(dict(self.options))


class _BatchReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.bootstrap, self.topic, self.since = _options(options)
        self.start_offsets = _offsets_option(options, "start_offsets")
        self.end_offsets = _offsets_option(options, "end_offsets")

    def partitions(self) -> list[InputPartition]:
        ranges = _ranges(self.bootstrap, self.topic, self.since, self.start_offsets, self.end_offsets)
        return list(ranges) or [TopicPartitionRange(-1, 0, 0)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, TopicPartitionRange)
        if partition.partition < 0:
            return iter(())
        return _read(self.bootstrap, self.topic, partition)


class _StreamReader(DataSourceStreamReader):
    """Micro-batches between listed end offsets (streaming needs a known end per batch)."""

    def __init__(self, options: dict[str, str]) -> None:
        self.bootstrap, self.topic, self.since = _options(options)

    def _latest(self) -> dict[str, int]:
        from kcoord.analytics import kafka_io

        parts = kafka_io.partitions(self.bootstrap, self.topic)
        ends = kafka_io.list_offsets(self.bootstrap, self.topic, dict.fromkeys(parts, kafka_io.LATEST))
        return {str(p): o for p, o in ends.items()}

    def initialOffset(self) -> dict[str, int]:
        return {str(r.partition): r.start for r in _ranges(self.bootstrap, self.topic, self.since)}

    # The signature before Spark 4.2 (no start offset, no read limit), which pyproject still allows;
    # Spark 4.2+ calls it too when a source implements only this one.
    def latestOffset(self) -> dict[str, int]:  # type: ignore[override]
        return self._latest()

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        return [
            TopicPartitionRange(int(p), start.get(p, 0), e) for p, e in end.items() if e > start.get(p, 0)
        ]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, TopicPartitionRange)
        return _read(self.bootstrap, self.topic, partition)

    def commit(self, end: dict[str, int]) -> None:
        pass
