"""What ``kcoord analytics`` hands Spark: pass-through settings, output paths, and the checks on
them before Spark starts (no Spark session needed, but for the last test: it asks the JVM of the
session kcoord started which collector it runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kcoord.analytics.run import main, session_conf
from kcoord.analytics.tables import join, local_dir


def test_packages_jars_py_files_and_conf_are_passed_to_spark() -> None:
    settings = session_conf(
        packages="org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.1",
        jars="/opt/a.jar,/opt/b.jar",
        py_files="dist/kcoord-0.1.0-py3-none-any.whl",
        conf=["spark.executor.memory=4g", "spark.sql.shuffle.partitions=64", "spark.x=a=b"],
    )
    assert settings["spark.jars.packages"] == "org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.1"
    assert settings["spark.jars"] == "/opt/a.jar,/opt/b.jar"
    assert settings["spark.submit.pyFiles"] == "dist/kcoord-0.1.0-py3-none-any.whl"
    assert settings["spark.executor.memory"] == "4g"
    assert settings["spark.sql.shuffle.partitions"] == "64"  # --conf comes last: it wins
    assert settings["spark.x"] == "a=b"  # split at the first '=' only
    assert settings["spark.sql.session.timeZone"] == "UTC"


def test_the_driver_jvm_kcoord_starts_runs_the_throughput_collector_unless_told_otherwise() -> None:
    assert session_conf()["spark.driver.extraJavaOptions"] == "-XX:+UseParallelGC"
    mine = session_conf(conf=["spark.driver.extraJavaOptions=-XX:+UseG1GC -Dx=1"])
    assert mine["spark.driver.extraJavaOptions"] == "-XX:+UseG1GC -Dx=1"


def test_a_session_someone_else_launched_gets_only_sql_settings_from_us() -> None:
    """spark-submit or a Spark Connect server owns memory and the UI; kcoord asks for neither."""
    settings = session_conf(launching=False)
    assert "spark.driver.memory" not in settings and "spark.ui.enabled" not in settings
    assert "spark.driver.extraJavaOptions" not in settings
    assert settings["spark.sql.mapKeyDedupPolicy"] == "LAST_WIN"
    # a SQL setting, so it reaches a Spark Connect server's session too: the strict schema's
    # checks compile to a method too large for the JVM's JIT without it
    assert settings["spark.sql.codegen.hugeMethodLimit"] == "8000"


def test_output_paths_are_joined_as_uris_not_pathlib() -> None:
    assert join("s3a://bucket/kcoord/", "events") == "s3a://bucket/kcoord/events"
    assert join("hdfs://nn:8020/x", "_raw") == "hdfs://nn:8020/x/_raw"
    assert join("file:///data/k", "lag") == "file:///data/k/lag"
    assert local_dir("s3a://bucket/kcoord") is None and local_dir("hdfs://nn/x") is None
    assert local_dir("file:///data/k") == Path("/data/k")
    assert local_dir("out/report") == Path("out/report")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--conf", "spark.executor.memory"], "--conf 'spark.executor.memory': give KEY=VALUE"),
        (["--master", "local[2]", "--remote", "sc://h:15002"], "--master and --remote both name a Spark"),
        (["--incremental", "--input-parquet", "/tmp/x"], "--incremental reads topics"),
    ],
)
def test_bad_spark_options_are_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--bootstrap-server", "127.0.0.1:1", "--out", "/tmp/x", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_a_remote_out_needs_a_local_report_dir(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--bootstrap-server", "127.0.0.1:1", "--out", "s3a://bucket/kcoord"]) == 2
    assert "give --report-dir for the report, or --no-report" in capsys.readouterr().err


def test_the_movement_is_written_first_and_the_tables_reading_its_cache_last() -> None:
    """The other writer has tables of its own while the movement's cache is computed: the
    rebalances (which read it) come after every other table; the rest keep their order."""
    from kcoord.analytics.run import write_order

    built = ["bad_events", "movement", "rebalances", "reconciliations", "commits", "zombies", "lag"]
    assert write_order(dict.fromkeys(built)) == [
        "movement", "bad_events", "reconciliations", "commits", "zombies", "lag", "rebalances",
    ]  # fmt: skip
    offsets_only = ["offset_commits", "generations", "generation_movement"]
    assert write_order(dict.fromkeys(offsets_only)) == offsets_only


def test_the_session_kcoord_starts_has_a_parallel_collector(spark: Any) -> None:
    """The setting reaches the JVM: its collectors are the Parallel ones (G1's would be G1 Young/Old)."""
    beans = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    names = sorted(str(bean.getName()) for bean in beans)
    assert names == ["PS MarkSweep", "PS Scavenge"], names
