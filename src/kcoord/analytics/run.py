"""``kcoord analytics``: read the topics, build the tables, write Parquet and the HTML report.

    kcoord analytics --bootstrap-server HOST:PORT [--since 2026-11-23T10:00|3h|EPOCH_MS] --out PATH
                     [--master local[*] | --remote sc://HOST:PORT] [--incremental]
                     [--events-topic __kcoord_events] [--offsets-topic __kcoord_offsets]
                     [--source auto|spark-kafka|python] [--input-parquet DIR]
                     [--packages G:A:V] [--jars JAR,...] [--py-files ZIP,...] [--conf K=V ...]

Spark reads each topic in parallel, one Spark partition per topic partition: with Spark's own
Kafka source when its connector (``org.apache.spark.sql.kafka010.KafkaSourceProvider``) is on the
classpath (``--packages org.apache.spark:spark-sql-kafka-0-10_2.13:VERSION`` or ``--jars``),
otherwise with kcoord's Python data source (:mod:`.datasource`). ``--offsets-topic
__consumer_offsets`` runs the commit, lag and generation part against a plain Kafka cluster.
``--input-parquet DIR`` reads the event records (columns of Spark's Kafka source) from Parquet
files instead of a cluster: used by the scale benchmark.

``--out`` is any path Spark writes to (``s3a://``, ``hdfs://``, ``file://``, local). The session is
local (``--master``), a Spark Connect server's (``--remote``), or the one ``spark-submit`` made
(then ``--master`` and the memory settings are spark-submit's). ``--incremental`` reads only what
arrived since the last run (:mod:`.checkpoint`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from . import tables

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
    p.add_argument(
        "--out",
        required=True,
        help="where the Parquet tables go: any path Spark writes to (s3a://, hdfs://, file://, local)",
    )
    p.add_argument(
        "--report-dir",
        help="local directory for report.html and plots/ (default: --out when it is local)",
    )
    p.add_argument(
        "--since", help="only events at or after: ISO time (UTC), EPOCH_MS, or an age like 3h, 2d, 30m"
    )
    p.add_argument(
        "--master",
        default=None,
        help="Spark master (default local[*]; under spark-submit, spark-submit's own --master)",
    )
    p.add_argument("--remote", help="a Spark Connect server, sc://HOST:PORT (instead of --master)")
    p.add_argument(
        "--incremental",
        action="store_true",
        help="read only what arrived since the last run (checkpoint beside --out) and append",
    )
    p.add_argument(
        "--partition-by-group",
        action="store_true",
        help="split the tables by group as well as by date (one directory per group)",
    )
    p.add_argument("--packages", help="Maven coordinates for Spark (spark.jars.packages)")
    p.add_argument("--jars", help="jars for Spark's classpath, comma-separated (spark.jars)")
    p.add_argument("--py-files", help="zip/wheel/py files for the executors (spark.submit.pyFiles)")
    p.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting (repeatable)"
    )
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


OPTION_DEFAULTS: dict[str, Any] = {
    "report_dir": None,
    "master": None,
    "remote": None,
    "incremental": False,
    "partition_by_group": False,
    "packages": None,
    "jars": None,
    "py_files": None,
    "conf": [],
    "driver_memory": None,
}

# SQL settings the pipeline relies on; runtime ones, so a Spark Connect session takes them too.
RUNTIME_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.mapKeyDedupPolicy": "LAST_WIN",  # a partition listed twice: the last owner
    # a group named "007" stays a string when a table split by group is read back
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    # the report's toPandas as Arrow batches, not a pickled Row per row (Spark Connect always is)
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # The strict schema's checks make one generated method larger than the 8,000 bytecode bytes the
    # JVM compiles (HotSpot's DontCompileHugeMethods): it ran interpreted, and parsing and checking
    # the events took 2.5x the CPU (bench/RESULTS.md, "Analytics"). Above this size Spark generates
    # code per operator instead of one method for the whole stage.
    "spark.sql.codegen.hugeMethodLimit": "8000",
    # Files read (``--input-parquet``, an incremental run's ``_raw``) are split into tasks of at most
    # this much, not Spark's 128 MB: 10M events in 20 files of 18 MB made 4 tasks (3M, 3M, 3M, 1M
    # events), so one core ran the last alone, and each task's sort before the write spilled. Every
    # table read from the parse cache keeps its partitions, so the imbalance went on through them all.
    "spark.sql.files.maxPartitionBytes": "32m",
}


# The driver JVM kcoord starts (in local mode it runs every task too): the throughput collector, not
# JDK 17's default G1, whose concurrent marking and refinement threads take cores from the tasks on a
# batch job's full heap. 10M events, two pairs side by side: the whole run 117.4 / 124.9 s against
# 147.1 / 138.0, the process tree 202.5 / 215.5 CPU-s against 258.0 / 239.4 (bench/RESULTS.md,
# analytics, "2026-11-29 10:03-11:04 UTC"). A ``--conf spark.driver.extraJavaOptions=...`` replaces it.
DRIVER_JAVA_OPTIONS = "-XX:+UseParallelGC"


def with_defaults(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` with every option set (callers that build a Namespace by hand name only some)."""
    return argparse.Namespace(**{**OPTION_DEFAULTS, **vars(args)})


def under_spark_submit() -> bool:
    """True when spark-submit started this Python (its JVM is up and owns master and memory)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def session_conf(
    shuffle_partitions: int = 8,
    driver_memory: str | None = None,
    packages: str | None = None,
    jars: str | None = None,
    py_files: str | None = None,
    conf: list[str] | None = None,
    launching: bool = True,
) -> dict[str, str]:
    """The settings a session is built with: ours, then the pass-through ones (``--conf`` last, so
    it can change any of them). ``launching``: this process starts the JVM (not spark-submit, not
    a Spark Connect server), so static settings (memory, jars) are ours to give."""
    settings = {"spark.sql.shuffle.partitions": str(shuffle_partitions), **RUNTIME_CONF}
    if launching:
        settings.update(
            {
                "spark.ui.enabled": "false",
                "spark.ui.showConsoleProgress": "false",
                "spark.log.level": "ERROR",
                "spark.driver.memory": driver_memory or os.environ.get("KCOORD_SPARK_DRIVER_MEMORY", "2g"),
                "spark.driver.extraJavaOptions": DRIVER_JAVA_OPTIONS,
            }
        )
    for key, value in (
        ("spark.jars.packages", packages),
        ("spark.jars", jars),
        ("spark.submit.pyFiles", py_files),
    ):
        if value:
            settings[key] = value
    for item in conf or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--conf {item!r}: give KEY=VALUE")
        settings[key.strip()] = value
    return settings


def spark_session(
    master: str | None,
    app: str = "kcoord-analytics",
    shuffle_partitions: int = 8,
    driver_memory: str | None = None,
    remote: str | None = None,
    packages: str | None = None,
    jars: str | None = None,
    py_files: str | None = None,
    conf: list[str] | None = None,
) -> Any:
    """A local session (``master``, default local[*]), a Spark Connect one (``remote``), or the one
    spark-submit started; with kcoord's Kafka data source registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    launching = remote is None and not under_spark_submit()
    settings = session_conf(shuffle_partitions, driver_memory, packages, jars, py_files, conf, launching)
    builder = SparkSession.builder.appName(app)
    if remote is not None:
        builder = builder.remote(remote)
    elif launching or master:
        builder = builder.master(master or "local[*]")
    if remote is None:  # a Spark Connect server takes no settings at connection time
        for key, value in settings.items():
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if remote is not None or not launching:
        # a server's or spark-submit's session: static settings are theirs; the SQL ones are ours
        for key, value in settings.items():
            if key.startswith("spark.sql."):
                spark.conf.set(key, value)
    from .datasource import KafkaTopicDataSource

    spark.dataSource.register(KafkaTopicDataSource)
    return spark


def spark_kafka_available(spark: Any) -> bool:
    """Whether Spark's own Kafka source is on the session's classpath: asked through the
    DataFrame API (resolving a read's schema), so it works under Spark Connect too."""
    try:
        _ = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", "127.0.0.1:1")
            .option("subscribe", "kcoord-probe")
            .load()
            .columns
        )
        return True
    except Exception as exc:
        text = str(exc)
        if "DATA_SOURCE_NOT_FOUND" in text or "Failed to find data source" in text:
            return False
        raise


def _kafka_offsets_json(topic: str, offsets: dict[int, int]) -> str:
    return json.dumps({topic: {str(p): o for p, o in offsets.items()}})


def read_topic(
    spark: Any,
    bootstrap: str,
    topic: str,
    since_ms: int | None,
    source: str,
    start_offsets: dict[int, int] | None = None,
    end_offsets: dict[int, int] | None = None,
) -> tuple[Any, str]:
    """The topic's records (``partition, offset, timestamp (ms), key, value``) and the source used;
    ``start_offsets``/``end_offsets`` (partition → offset) bound an incremental read."""
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
        if start_offsets:
            # -2: a partition the checkpoint does not know yet starts at the beginning
            known = {p: start_offsets.get(p, -2) for p in (end_offsets or start_offsets)}
            reader = reader.option("startingOffsets", _kafka_offsets_json(topic, known))
        elif since_ms is not None:
            reader = reader.option("startingTimestamp", str(since_ms))
        if end_offsets:
            reader = reader.option("endingOffsets", _kafka_offsets_json(topic, end_offsets))
        df = reader.load().select(
            "partition", "offset", (F.unix_millis(F.col("timestamp"))).alias("timestamp"), "key", "value"
        )
        return df, "spark-kafka"
    reader = spark.read.format("kcoord_kafka").option("bootstrap", bootstrap).option("topic", topic)
    if since_ms is not None:
        reader = reader.option("since_ms", str(since_ms))
    if start_offsets:
        reader = reader.option("start_offsets", json.dumps({str(p): o for p, o in start_offsets.items()}))
    if end_offsets:
        reader = reader.option("end_offsets", json.dumps({str(p): o for p, o in end_offsets.items()}))
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


# Tables with one row per record read (or per record's map entry): an incremental run appends the
# rows of its new records. Every other table spans the history and is rebuilt from the stored records.
APPENDED_TABLES = frozenset(
    {"events", "bad_events", "commits", "fencing", "shard_loads", "offset_commits", "bad_offset_records"}
)


def _session(args: argparse.Namespace) -> Any:
    return spark_session(
        args.master,
        driver_memory=args.driver_memory,
        remote=args.remote,
        packages=args.packages,
        jars=args.jars,
        py_files=args.py_files,
        conf=args.conf,
    )


def _report_dir(args: argparse.Namespace) -> Path | None:
    if args.report_dir:
        return Path(args.report_dir)
    return tables.local_dir(args.out)


def _read_sources(
    spark: Any, args: argparse.Namespace, since: int | None, summary: dict[str, Any]
) -> tuple[Any, Any]:
    """The event and offsets records of a whole (not incremental) run."""
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
    return raw_events, raw_offsets


def _incremental_sources(
    spark: Any, args: argparse.Namespace, since: int | None, summary: dict[str, Any], run_id: int
) -> tuple[dict[str, tuple[Any, Any]], dict[str, dict[int, int]], dict[str, dict[int, int]]] | None:
    """Read what arrived since the checkpoint into ``_raw`` and give, per role ("events",
    "offsets"), the (new, all committed + new) records, and per topic the offsets this run starts
    reading at and the end offsets to commit; None when nothing arrived (no work at all)."""
    from . import checkpoint, kafka_io

    if args.input_parquet:
        raise ValueError("--incremental reads topics; it does not apply to --input-parquet")
    ckpt = checkpoint.load(spark, args.out)
    topics = {"events": args.events_topic, "offsets": args.offsets_topic}
    topics = {role: t for role, t in topics.items() if t}
    ends: dict[str, dict[int, int]] = {}
    starts: dict[str, dict[int, int]] = {}
    for topic in topics.values():
        ends[topic] = kafka_io.stable_end_offsets(args.bootstrap_server, topic)
        starts[topic] = ckpt.starts(topic)
    to_read = {
        topic: sum(max(0, end - starts[topic].get(p, 0)) for p, end in ends[topic].items())
        for topic in topics.values()
    }
    summary["checkpoint_runs"] = len(ckpt.runs)
    summary["offsets_to_read"] = to_read
    if not any(to_read.values()):
        return None
    sources: dict[str, tuple[Any, Any]] = {}
    for role, topic in topics.items():
        first_read = not starts[topic]
        raw, summary["source"] = read_topic(
            spark,
            args.bootstrap_server,
            topic,
            since if first_read else None,
            args.source,
            start_offsets=starts[topic] or None,
            end_offsets=ends[topic],
        )
        # The topic is read once, into _raw; everything after reads the Parquet files.
        checkpoint.append_raw(raw, args.out, topic, run_id)
        new = checkpoint.raw_records(spark, args.out, topic, {run_id})
        # a first run's history is its own records: the same DataFrame, built once
        every = checkpoint.raw_records(spark, args.out, topic, ckpt.runs | {run_id}) if ckpt.runs else new
        sources[role] = (new, every)
    return sources, starts, ends


def _events_writer(spark: Any, args: argparse.Namespace, mode: str) -> Any:
    """The events table's write for :func:`pipeline.write_events`: ``mode`` "overwrite" or
    "append"; it gives the whole table read back (without its partition column)."""

    def write(good: Any) -> Any:
        tables.write_table(spark, good, args.out, "events", mode, args.partition_by_group)
        return tables.read_table(spark, args.out, "events").drop(tables.PARTITION_DATE)

    return write


def _from_offsets(events: Any, starts: dict[int, int]) -> Any:
    """The events at or after ``starts`` (partition -> offset; a partition not there from 0)."""
    from pyspark.sql import functions as F

    if not starts:
        return events
    start = F.create_map(*[F.lit(x) for p, o in sorted(starts.items()) for x in (p, o)])[F.col("partition")]
    return events.where(F.col("offset") >= F.coalesce(start, F.lit(0)))


# Tables written at a time. One job alone leaves cores idle while the driver plans the next and
# while its last task runs alone; a second job's tasks take them. (Each job's tasks share the same
# cores: more writers than two buy nothing on top. A cached input, the movement, is computed once:
# a task that needs a block another is computing waits for it.)
TABLE_WRITERS = 2
TABLE_TAG = "kcoord-table-"  # each table's jobs are tagged TABLE_TAG + its name


# Tables that read another's cache (the movement's) are written after every other table: the
# other writer then has tables of its own to write while the cache is computed, rather than waiting
# for its blocks (in a 10M run the rebalances, handed out right after the movement, took 33 s for
# 16 CPU-s of tasks; in order, the tables' part of the run took 50-56 s, not 62).
WRITTEN_LAST = ("rebalances",)


def write_order(written: dict[str, Any]) -> list[str]:
    """The tables' names in the order they are handed to the writers: the movement first (the
    longest, and the one the rebalances wait for), those of WRITTEN_LAST last."""
    first = [name for name in written if name == "movement"]
    last = [name for name in written if name in WRITTEN_LAST]
    return first + [name for name in written if name not in first and name not in last] + last


def _write_tables(
    spark: Any, args: argparse.Namespace, written: dict[str, tuple[Any, str]], summary: dict[str, Any]
) -> None:
    def write(name: str, df: Any, mode: str) -> tuple[int, float]:
        spark.addTag(TABLE_TAG + name)  # this thread's jobs only
        try:
            t = time.monotonic()
            tables.write_table(spark, df, args.out, name, mode, args.partition_by_group)
            stored = tables.read_table(spark, args.out, name)
            return (0 if stored is None else stored.count()), round(time.monotonic() - t, 2)
        finally:
            spark.removeTag(TABLE_TAG + name)

    with ThreadPoolExecutor(TABLE_WRITERS, thread_name_prefix="kcoord-table") as pool:
        futures = {name: pool.submit(write, name, *written[name]) for name in write_order(written)}
        done = {name: f.result() for name, f in futures.items()}
    summary["rows"] = {name: rows for name, (rows, _) in done.items()}
    # each table's from its start to its end, the other writer's work in between included
    summary["table_seconds"] = {name: seconds for name, (_, seconds) in done.items()}


def run(args: argparse.Namespace) -> dict[str, Any]:
    args = with_defaults(args)
    since = parse_since(args.since)
    report_dir = None if args.no_report else _report_dir(args)
    if not args.no_report and report_dir is None:
        raise ValueError(f"--out {args.out} is not local: give --report-dir for the report, or --no-report")
    started = time.monotonic()
    run_id = int(time.time() * 1000)
    spark = _session(args)
    session_seconds = round(time.monotonic() - started, 2)
    from . import checkpoint, pipeline

    summary: dict[str, Any] = {
        "session_seconds": session_seconds,
        "since_ms": since,
        "events_topic": args.events_topic,
        "offsets_topic": args.offsets_topic,
        "out": args.out,
    }
    written: dict[str, tuple[Any, str]] = {}
    events_table = None  # written by the parse, not with the others; as read back after its write
    if args.incremental:
        found = _incremental_sources(spark, args, since, summary, run_id)
        if found is None:  # nothing new: no table, report or checkpoint is touched
            summary.update(rows={}, table_seconds={}, records_read=0, no_work=True)
            summary["total_seconds"] = summary["pipeline_seconds"] = round(time.monotonic() - started, 2)
            return summary
        sources, starts, ends = found
        events_new, events_all = sources.get("events", (None, None))
        offsets_new, offsets_all = sources.get("offsets", (None, None))
        first_run = events_all is events_new and offsets_all is offsets_new
        t = time.monotonic()
        # The events table is written in the parse's own pass and every other events table read
        # from it. One written by an older kcoord lacks fields the others read (assignment, fenced,
        # rejected), and one removed by hand lacks every event: either is written again, from every
        # record read so far, with the tables appended from it.
        rewrite = False
        new_parse = every_parse = None
        if events_new is not None:
            stored = None if first_run else tables.read_table(spark, args.out, "events")
            rewrite = not first_run and (stored is None or "assignment" not in stored.columns)
            mode = "overwrite" if first_run or rewrite else "append"
            events_table, bad = pipeline.write_events(
                events_all if rewrite else events_new, _events_writer(spark, args, mode)
            )
            if first_run or rewrite:
                every = fresh = events_table
            else:
                # The table holds every event now: the committed runs' and this one's, and a stopped
                # run's rows, appended before it could commit: each record is counted once.
                every = events_table.dropDuplicates(["partition", "offset"])
                fresh = _from_offsets(every, starts[args.events_topic])
            # bad_events is appended from this run's records alone (every_parse's is not written)
            new_parse, every_parse = (fresh, bad), (every, bad)
        new_tables = pipeline.build_from(spark, new_parse, offsets_new)
        all_tables = new_tables if first_run else pipeline.build_from(spark, every_parse, offsets_all)
        summary["parse_seconds"] = round(time.monotonic() - t, 2)
        for name, df in all_tables.items():
            if name == "events":
                continue  # written by the parse
            if name in APPENDED_TABLES:
                if name in new_tables:  # absent: that topic had no record to read this time
                    # a first run replaces what a whole (not incremental) run may have left there
                    whole = first_run or (rewrite and name in pipeline.EVENT_TABLES)
                    written[name] = (new_tables[name], "overwrite" if whole else "append")
            else:
                written[name] = (df, "overwrite")
        commits_for_lag = all_tables.get("offset_commits")
        summary["records_read"] = sum(df.count() for df in (events_new, offsets_new) if df is not None)
    else:
        raw_events, raw_offsets = _read_sources(spark, args, since, summary)
        t = time.monotonic()
        parsed = None
        if raw_events is not None:
            parsed = pipeline.write_events(raw_events, _events_writer(spark, args, "overwrite"))
            events_table = parsed[0]
        built = pipeline.build_from(spark, parsed, raw_offsets)
        summary["parse_seconds"] = round(time.monotonic() - t, 2)
        written = {name: (df, "overwrite") for name, df in built.items() if name != "events"}
        commits_for_lag = built.get("offset_commits")
    if commits_for_lag is not None and args.bootstrap_server:
        lag = lag_table(spark, args.bootstrap_server, commits_for_lag, args.lag_points)
        if lag is not None:
            written["lag"] = (lag, "overwrite")
    _write_tables(spark, args, written, summary)
    if events_table is not None:
        summary["rows"] = {"events": events_table.count(), **summary["rows"]}
    # The movement's cache is no use to the report (it reads the written tables): the memory and
    # the disk it took go back before it runs.
    spark.catalog.clearCache()
    if args.incremental:
        checkpoint.commit(spark, args.out, run_id, ends)  # last: the run counts once all is written
    summary["pipeline_seconds"] = round(time.monotonic() - started, 2)
    if report_dir is not None:
        from .report import write_report

        t = time.monotonic()
        write_report(spark, args.out, summary, report_dir)
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
    args = with_defaults(args)
    try:
        parse_since(args.since)
    except ValueError:
        return f"--since {args.since!r}: give an ISO time (UTC), EPOCH_MS, or an age like 3h, 2d, 30m"
    try:
        session_conf(conf=args.conf)
    except ValueError as exc:
        return str(exc)
    if args.master and args.remote:
        return "--master and --remote both name a Spark: give one"
    if not args.no_report and _report_dir(args) is None:
        return f"--out {args.out} is not a local path: give --report-dir for the report, or --no-report"
    if args.incremental and args.input_parquet:
        return "--incremental reads topics since the last run; it does not apply to --input-parquet"
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
    if summary.get("no_work"):
        print(f"{args.out}: nothing arrived since the last run (checkpoint unchanged)")
        return 0
    print(
        f"wrote {args.out}: "
        + ", ".join(f"{k}={v}" for k, v in summary["rows"].items())
        + f" in {summary['total_seconds']} s"
    )
    return 0
