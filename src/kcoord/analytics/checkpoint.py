"""The incremental runs' state beside the tables: which offsets were read, and the records read.

``<out>/_checkpoint``: one row per (run, topic, partition) with the offset the run read up to
(exclusive). A run starts each partition where the last committed run stopped; a run is committed
once its row is written, after every table it wrote.

``<out>/_raw/<topic>/run=<id>``: the records each run read (Spark's Kafka-source columns). The
tables whose rows span the history (a rebalance started in one run and completed in the next, a
generation's movement from the previous one, zombies, churn, lag) are rebuilt from these files,
not by reading the topic again, and they outlive the topic's retention. Files of a run that never
committed (it stopped before its checkpoint row) are ignored, so a stopped run is read again whole
and counted once in those tables.

Both are Parquet tables written through Spark's DataFrame API: any ``--out`` Spark can write to,
also from a Spark Connect session.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .tables import join, read_table

CHECKPOINT = "_checkpoint"
RAW = "_raw"
CHECKPOINT_SCHEMA = "run long, topic string, partition int, next_offset long"


@dataclass
class Checkpoint:
    runs: set[int] = field(default_factory=set)  # committed runs
    next_offsets: dict[tuple[str, int], int] = field(default_factory=dict)  # (topic, partition) →

    def starts(self, topic: str) -> dict[int, int]:
        return {p: o for (t, p), o in self.next_offsets.items() if t == topic}


def load(spark: Any, out: str) -> Checkpoint:
    df = read_table(spark, out, CHECKPOINT)
    ckpt = Checkpoint()
    if df is None:
        return ckpt
    for row in df.collect():
        ckpt.runs.add(int(row["run"]))
        key = (str(row["topic"]), int(row["partition"]))
        ckpt.next_offsets[key] = max(ckpt.next_offsets.get(key, 0), int(row["next_offset"]))
    return ckpt


def commit(spark: Any, out: str, run: int, ends: dict[str, dict[int, int]]) -> None:
    rows = [(run, topic, p, o) for topic, parts in ends.items() for p, o in sorted(parts.items())]
    spark.createDataFrame(rows, CHECKPOINT_SCHEMA).coalesce(1).write.mode("append").parquet(
        join(out, CHECKPOINT)
    )


def raw_path(out: str, topic: str) -> str:
    return join(join(out, RAW), topic)


def append_raw(raw: Any, out: str, topic: str, run: int) -> None:
    from pyspark.sql import functions as F

    raw.withColumn("run", F.lit(run).cast("long")).write.mode("append").partitionBy("run").parquet(
        raw_path(out, topic)
    )


def raw_records(spark: Any, out: str, topic: str, runs: set[int]) -> Any:
    """The stored records of ``topic`` read by ``runs`` (Spark's Kafka-source columns), or None."""
    from pyspark.sql import functions as F

    df = read_table(spark, join(out, RAW), topic)
    if df is None or not runs:
        return None
    return df.where(F.col("run").cast("long").isin(sorted(runs))).select(
        "partition", "offset", "timestamp", "key", "value"
    )
