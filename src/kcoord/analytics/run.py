"""``kcoord analytics``: read the topics, build the tables, write Parquet and the HTML report.

    kcoord analytics --bootstrap-server HOST:PORT [--since 2026-11-23T10:00|3h|EPOCH_MS] --out DIR
                     [--master local[*]] [--events-topic __kcoord_events] [--offsets-topic __kcoord_offsets]
                     [--source auto|spark-kafka|python] [--input-parquet DIR]

Spark reads each topic in parallel, one Spark partition per topic partition: with Spark's own
Kafka source when its connector (``org.apache.spark.sql.kafka010.KafkaSourceProvider``) is on the
classpath, otherwise with kcoord's Python data source (:mod:`.datasource`). ``--offsets-topic
__consumer_offsets`` runs the commit, lag and generation part against a plain Kafka cluster.
``--input-parquet DIR`` reads the event records (columns of Spark's Kafka source) from Parquet
files instead of a cluster: used by the scale benchmark.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

KAFKA_PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "analytics",
        help="PySpark pipeline: rebalances, state shuffling, fencing, churn and lag → Parquet + HTML",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fill_parser(p)
    return p


def fill_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", help="HOST:PORT[,...] of kcoord or the Kafka cluster")
    p.add_argument("--out", required=True, help="output directory (Parquet tables, report.html, plots/)")
    p.add_argument(
        "--since", help="only events at or after: ISO time (UTC), EPOCH_MS, or an age like 3h, 2d, 30m"
    )
    p.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    p.add_argument("--events-topic", default="__kcoord_events")
    p.add_argument(
        "--offsets-topic",
        default="__kcoord_offsets",
        help="offsets/group-metadata topic in __consumer_offsets format ('' to skip)",
    )
    p.add_argument("--source", choices=("auto", "spark-kafka", "python"), default="auto")
    p.add_argument("--input-parquet", help="read the event records from Parquet instead of a cluster")
    p.add_argument("--no-report", action="store_true", help="write the tables only")
    p.add_argument("--lag-points", type=int, default=30, help="points in time at which lag is computed")
    p.add_argument(
        "--driver-memory",
        default=None,
        help="spark.driver.memory (with local[*], all of Spark's memory; default 2g, or KCOORD_SPARK_DRIVER_MEMORY)",
    )


def parse_since(text: str | None, now_ms: int | None = None) -> int | None:
    if not text:
        return None
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    m = re.fullmatch(r"(\d+)([smhd])", text.strip())
    if m:
        return (
            now_ms - int(m.group(1)) * {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}[m.group(2)]
        )
    if text.strip().isdigit():
        return int(text)
    from datetime import UTC, datetime

    dt = datetime.fromisoformat(text.strip())
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp() * 1000)


def spark_session(
    master: str, app: str = "kcoord-analytics", shuffle_partitions: int = 8, driver_memory: str | None = None
) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.mapKeyDedupPolicy", "LAST_WIN")  # a partition listed twice: the last owner
        .config("spark.driver.memory", driver_memory or os.environ.get("KCOORD_SPARK_DRIVER_MEMORY", "2g"))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    from .datasource import KafkaTopicDataSource

    spark.dataSource.register(KafkaTopicDataSource)
    return spark


def spark_kafka_available(spark: Any) -> bool:
    try:
        spark.sparkContext._jvm.java.lang.Class.forName(KAFKA_PROVIDER)
        return True
    except Exception:
        return False


def read_topic(spark: Any, bootstrap: str, topic: str, since_ms: int | None, source: str) -> tuple[Any, str]:
    """The topic's records (``partition, offset, timestamp (ms), key, value``) and the source used."""
    from pyspark.sql import functions as F

    use_spark = source == "spark-kafka" or (source == "auto" and spark_kafka_available(spark))
    if use_spark:
        # read_committed: an aborted transaction's records (a TxnOffsetCommit) are no data, as for
        # the Python source, which drops them by the log's markers (kafka_io.take_committed).
        reader = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("kafka.isolation.level", "read_committed")
            .option("subscribe", topic)
        )
        if since_ms is not None:
            reader = reader.option("startingTimestamp", str(since_ms))
        df = reader.load().select(
            "partition", "offset", (F.unix_millis(F.col("timestamp"))).alias("timestamp"), "key", "value"
        )
        return df, "spark-kafka"
    reader = spark.read.format("kcoord_kafka").option("bootstrap", bootstrap).option("topic", topic)
    if since_ms is not None:
        reader = reader.option("since_ms", str(since_ms))
    return reader.load().select("partition", "offset", "timestamp", "key", "value"), "python"


def lag_table(spark: Any, bootstrap: str, offset_commits: Any, points: int) -> Any:
    """Consumer lag per (group, topic, partition) at ``points`` times: the partition's end offset
    then (ListOffsets by timestamp) minus the group's last commit at or before it."""
    import pandas as pd
    from pyspark.sql import functions as F

    from . import kafka_io

    span = offset_commits.agg(F.min("ts").alias("lo"), F.max("ts").alias("hi")).collect()[0]
    if span["lo"] is None:
        return None
    lo, hi = int(span["lo"]), max(int(span["hi"]), int(time.time() * 1000))
    step = max(1, (hi - lo) // max(1, points - 1))
    grid = [lo + i * step for i in range(points - 1)] + [hi]
    # the last commit per (group, topic, partition, grid point): computed in Spark, small to collect
    bucket = F.least(F.ceil((F.col("ts") - F.lit(lo)) / F.lit(step)).cast("long"), F.lit(points - 1))
    last = (
        offset_commits.withColumn("b", bucket)
        .groupBy("group", "topic", "partition", "b")
        .agg(F.max_by("offset", "ts").alias("offset"))
        .toPandas()
    )
    rows = []
    for topic, tdf in last.groupby("topic"):
        parts = sorted({int(p) for p in tdf["partition"]})
        try:
            ends = kafka_io.end_offsets_over_time(bootstrap, str(topic), parts, grid)
        except Exception:
            ends = {}
        for (group, partition), g in tdf.groupby(["group", "partition"]):
            by_bucket = dict(zip(g["b"].astype(int), g["offset"].astype(int), strict=False))
            committed = None
            for i, t in enumerate(grid):
                committed = by_bucket.get(i, committed)
                if committed is None:
                    continue
                end = ends.get((int(partition), t), -1)
                # an end offset below the commit is a wrong answer (tansu's timestamp lookups): unknown
                rows.append(
                    (
                        group,
                        str(topic),
                        int(partition),
                        t,
                        committed,
                        end,
                        end - committed if end >= committed else None,
                    )
                )
    pdf = pd.DataFrame(rows, columns=["group", "topic", "partition", "ts", "committed", "end_offset", "lag"])
    if pdf.empty:
        return None
    return spark.createDataFrame(pdf)


def run(args: argparse.Namespace) -> dict[str, Any]:
    since = parse_since(args.since)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    spark = spark_session(args.master, driver_memory=getattr(args, "driver_memory", None))
    from . import pipeline

    summary: dict[str, Any] = {
        "since_ms": since,
        "events_topic": args.events_topic,
        "offsets_topic": args.offsets_topic,
    }
    raw_events = raw_offsets = None
    if args.input_parquet:
        raw_events = spark.read.parquet(args.input_parquet)
        summary["source"] = "parquet"
        if since is not None:
            raw_events = raw_events.where(raw_events.timestamp >= since)
    elif args.events_topic:
        raw_events, summary["source"] = read_topic(
            spark, args.bootstrap_server, args.events_topic, since, args.source
        )
    if args.offsets_topic and args.bootstrap_server and not args.input_parquet:
        raw_offsets, _ = read_topic(spark, args.bootstrap_server, args.offsets_topic, since, args.source)
    tables = pipeline.build(spark, raw_events, raw_offsets)
    if "offset_commits" in tables and args.bootstrap_server:
        lag = lag_table(spark, args.bootstrap_server, tables["offset_commits"], args.lag_points)
        if lag is not None:
            tables["lag"] = lag
    counts: dict[str, int] = {}
    seconds: dict[str, float] = {}
    for name, df in tables.items():
        t = time.monotonic()
        df.write.mode("overwrite").parquet(str(out / name))
        counts[name] = spark.read.parquet(str(out / name)).count()
        seconds[name] = round(time.monotonic() - t, 2)
    summary["rows"] = counts
    summary["table_seconds"] = seconds
    summary["pipeline_seconds"] = round(time.monotonic() - started, 2)
    if not args.no_report:
        from .report import write_report

        t = time.monotonic()
        write_report(spark, out, summary)
        summary["report_seconds"] = round(time.monotonic() - t, 2)
    summary["total_seconds"] = round(time.monotonic() - started, 2)
    return summary


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="kcoord analytics", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    fill_parser(p)
    args = p.parse_args(argv)
    return run_cli(args)


def preflight(args: argparse.Namespace) -> str | None:
    """What is wrong with the command line or the cluster, in one line, before Spark starts (a
    typo must not look like an empty topic, nor a dead cluster like a Java trace); None if nothing."""
    try:
        parse_since(args.since)
    except ValueError:
        return f"--since {args.since!r}: give an ISO time (UTC), EPOCH_MS, or an age like 3h, 2d, 30m"
    if args.input_parquet or not args.events_topic:
        return None
    from . import kafka_io

    try:
        found = kafka_io.partitions(args.bootstrap_server, args.events_topic)
    except Exception as exc:  # the client's own error names the broker and the cause
        return f"cannot reach {args.bootstrap_server}: {exc}"
    if not found:
        return (
            f"the events topic {args.events_topic!r} does not exist on {args.bootstrap_server} "
            "(--events-topic names it; '' skips it)"
        )
    return None


# What the pipeline imports (the [analytics] extra), by module name.
EXTRA_MODULES = ("pyspark", "pyarrow", "pandas", "matplotlib")
INSTALL_HINT = "pip install 'kcoord[analytics]'"


def missing_requirements() -> str | None:
    """What the pipeline needs and does not find, in one line; None if nothing. Checked before
    anything starts: a missing module surfaced before as a long Java trace from inside Spark's
    Python workers (pyarrow), one module per attempt."""
    import importlib

    missing = []
    for name in EXTRA_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        return f"needs {', '.join(missing)}: {INSTALL_HINT} (and Java 17 or later for Spark)"
    if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        return "needs Java 17 or later for Spark: none on PATH and JAVA_HOME is not set"
    return None


def run_cli(args: argparse.Namespace) -> int:
    if not args.bootstrap_server and not args.input_parquet:
        print("kcoord analytics: --bootstrap-server or --input-parquet is required", file=sys.stderr)
        return 2
    lacking = missing_requirements()
    if lacking is not None:
        print(f"kcoord analytics: {lacking}", file=sys.stderr)
        return 2
    problem = preflight(args)
    if problem is not None:
        print(f"kcoord analytics: {problem}", file=sys.stderr)
        return 2
    summary = run(args)
    print(
        f"wrote {args.out}: "
        + ", ".join(f"{k}={v}" for k, v in summary["rows"].items())
        + f" in {summary['total_seconds']} s"
    )
    return 0
