"""Where the pipeline's tables live and how they are written: any Hadoop/Spark path.

``--out`` is a location Spark writes to (``s3a://bucket/x``, ``hdfs://nn/x``, ``file:///x`` or a
plain local path), never a :class:`pathlib.Path`: a Path would fold ``s3a://`` into ``s3a:/``, and
only Spark knows how to reach a cluster's file system. Every read and write goes through Spark's
DataFrame API (no ``_jvm`` file-system calls), so a Spark Connect session writes the same tables.

Tables with a time column are partitioned by its UTC ``date`` (``date=2026-11-27/``): a query for
a day reads that day's files, and an incremental run appends a new file per day it saw. With
``--partition-by-group`` those with a ``group`` column are split by group too (``group=g1/``); off by
default, because a cluster with thousands of groups would write thousands of small files per day.
Rows are sorted by group within each file, so a reader filtering one group skips most row groups by
their Parquet statistics either way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlparse

# The time column each table is partitioned by (its UTC date); a table not named here is written
# whole: its rows span the history (a zombie's first and last fencing, a client's churn).
DATE_COLUMN = {
    "events": "ts",
    "bad_events": "record_ts",
    "rebalances": "completed_ts",
    "reconciliations": "completed_ts",
    "movement": "ts",
    "commits": "ts",
    "fencing": "ts",
    "shard_loads": "ts",
    "offset_commits": "ts",
    "generations": "ts",
    "generation_movement": "ts",
    "bad_offset_records": "ts",
    "lag": "ts",
}
PARTITION_DATE = "date"


def join(out: str, name: str) -> str:
    """``out``/``name`` for any URI or local path (no pathlib: it folds ``s3a://`` into ``s3a:/``)."""
    return f"{out.rstrip('/')}/{name}" if out.rstrip("/") else name


def local_dir(out: str) -> Path | None:
    """The local directory ``out`` names (a plain path or ``file:``), None for a remote store."""
    parsed = urlparse(out)
    if parsed.scheme == "file":
        return Path(parsed.path)
    if parsed.scheme == "":
        return Path(out)
    return None


def partition_columns(df: Any, name: str, by_group: bool) -> list[str]:
    cols = []
    if name in DATE_COLUMN and DATE_COLUMN[name] in df.columns:
        cols.append(PARTITION_DATE)
    if by_group and cols and "group" in df.columns:
        cols.append("group")
    return cols


def with_partition_columns(df: Any, name: str) -> Any:
    """``df`` with its ``date`` column (UTC, from the table's time column, epoch ms) if it has one."""
    from pyspark.sql import functions as F

    column = DATE_COLUMN.get(name)
    if column is None or column not in df.columns:
        return df
    return df.withColumn(PARTITION_DATE, F.date_format(F.timestamp_millis(F.col(column)), "yyyy-MM-dd"))


def write_table(spark: Any, df: Any, out: str, name: str, mode: str, by_group: bool = False) -> None:
    """Write ``df`` as Parquet table ``name`` under ``out``: ``mode`` "overwrite" or "append"."""
    df = with_partition_columns(df, name)
    cols = partition_columns(df, name, by_group)
    path = join(out, name)
    if cols and mode == "append":
        stored = read_table(spark, out, name)
        if stored is None or PARTITION_DATE not in stored.columns:
            mode = "overwrite"  # nothing there yet, or only an empty table's schema (below)
    # Each task writes one file per date it holds (no shuffle to gather a day in one task: a busy
    # day would be written by one core), its rows by group.
    order = cols + (["group"] if "group" in df.columns and "group" not in cols else [])
    if order:
        df = df.sortWithinPartitions(*order)
    writer = df.write.mode(mode)
    if cols:
        writer = writer.partitionBy(*cols)
    writer.parquet(path)
    if cols and read_table(spark, out, name) is None:
        # No row at all: a partitioned write leaves no file, and a reader could not tell the
        # table's columns. One file without rows keeps them.
        empty = df.drop(*cols)
        spark.createDataFrame([], empty.schema).write.mode("overwrite").parquet(path)


def read_table(spark: Any, out: str, name: str) -> Any:
    """Table ``name`` under ``out``, or None when it was never written."""
    try:
        df = spark.read.parquet(join(out, name))
        df.columns  # noqa: B018  (resolves the path: a missing table fails here, also under Spark Connect)
    except Exception as exc:
        text = str(exc)
        # never written, or written partitioned without a row (no file to read a schema from)
        if "PATH_NOT_FOUND" in text or "Path does not exist" in text or "UNABLE_TO_INFER_SCHEMA" in text:
            return None
        raise
    return df
