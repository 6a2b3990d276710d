"""CPU of parsing and checking the event records, by Spark's own task CPU time (which a loaded
machine does not inflate the way it does wall time), in one local[2] session:

    .venv/bin/python -m bench.analytics_parse_cpu /tmp/kcoord-analytics-scale/events-1000000 \\
        [--conf spark.sql.codegen.hugeMethodLimit=65535]

``DIR`` holds ``bench.analytics_scale``'s Parquet files. Each step writes to Spark's ``noop`` sink
(nothing cached, nothing written): ``from_json`` alone, then the same with the strict schema's
``problem`` column (:mod:`kcoord.analytics.event_schema`). A first pass warms the JIT. ``--conf``
overrides the pipeline's settings (the default 65535 is Spark's own ``hugeMethodLimit``). Prints
one JSON line: task CPU-seconds and wall seconds per step, from the session's event log.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def task_cpu_by_job(log_dir: Path) -> dict[str, float]:
    """Task CPU-seconds per job description, summed from the event log(s) under ``log_dir``."""
    stage_job: dict[int, str] = {}
    cpu: dict[str, float] = {}
    for path in log_dir.rglob("events_*"):
        for line in path.read_text().splitlines():
            e = json.loads(line)
            if e["Event"] == "SparkListenerJobStart":
                name = e.get("Properties", {}).get("spark.job.description", "")
                for s in e["Stage IDs"]:
                    stage_job[s] = name
            elif e["Event"] == "SparkListenerTaskEnd" and e.get("Task Metrics"):
                name = stage_job.get(e["Stage ID"], "")
                cpu[name] = cpu.get(name, 0.0) + e["Task Metrics"]["Executor CPU Time"] / 1e9
    return cpu


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    args = p.parse_args()
    from pyspark.sql import functions as F

    from kcoord.analytics import event_schema as es
    from kcoord.analytics.run import spark_session

    log_dir = Path(tempfile.mkdtemp(prefix="kcoord-parse-cpu-"))
    conf = [
        "spark.eventLog.enabled=true",
        f"spark.eventLog.dir={log_dir}",
        "spark.eventLog.compress=false",
        *args.conf,
    ]
    spark = spark_session("local[2]", conf=conf)
    raw = spark.read.parquet(args.dir)
    text = F.col("value").cast("string")
    parsed = raw.select(
        "partition",
        "offset",
        "value",
        text.alias("text"),
        F.from_json(text, es.PARSE_SCHEMA, es.JSON_OPTIONS).alias("e"),
    )
    fields = [F.col("e")[f.name].alias(f.name) for f in es.EVENT_SCHEMA_V1.fields]
    steps = {
        "warm-up": parsed.select("partition", "offset", *fields),
        "from_json": parsed.select("partition", "offset", *fields),
        "from_json + strict check": parsed.select(
            "partition",
            "offset",
            es.problem(F.col("value"), F.col("text"), F.col("e")).alias("problem"),
            *fields,
        ),
    }
    wall: dict[str, float] = {}
    for name, df in steps.items():
        spark.sparkContext.setJobDescription(name)
        started = time.monotonic()
        df.write.format("noop").mode("overwrite").save()
        wall[name] = round(time.monotonic() - started, 1)
    spark.stop()
    cpu = task_cpu_by_job(log_dir)
    print(
        json.dumps(
            {
                "conf": args.conf,
                "cpu_seconds": {k: round(cpu.get(k, 0.0), 1) for k in steps},
                "wall_seconds": wall,
            }
        )
    )


if __name__ == "__main__":
    main()
