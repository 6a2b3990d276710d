"""`kcoord analytics` is a subcommand of the kcoord CLI, and `--source spark-kafka` needs the connector jar."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from kcoord.coordinator.cli import build_parser, main


def test_the_subcommand_parses_its_options() -> None:
    args = build_parser().parse_args(
        [
            "analytics",
            "--bootstrap-server",
            "h:9092",
            "--out",
            "/tmp/x",
            "--since",
            "3h",
            "--master",
            "local[2]",
            "--offsets-topic",
            "__consumer_offsets",
        ]
    )
    assert (args.command, args.bootstrap_server, args.since, args.master) == (
        "analytics",
        "h:9092",
        "3h",
        "local[2]",
    )
    assert (args.events_topic, args.offsets_topic, args.source) == (
        "__kcoord_events",
        "__consumer_offsets",
        "auto",
    )


def test_it_needs_a_cluster_or_files(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analytics", "--out", "/tmp/x"]) == 2
    assert "--bootstrap-server or --input-parquet" in capsys.readouterr().err


def test_auto_picks_the_python_source_without_the_connector_jar(spark: Any) -> None:
    from kcoord.analytics.run import spark_kafka_available

    if spark_kafka_available(spark):
        pytest.skip("the spark-sql-kafka connector is on this classpath: auto uses Spark's own Kafka source")
    # Spark's own source really is missing (so the fallback is needed, not merely chosen)
    with pytest.raises(Exception, match="(?i)kafka"):
        spark.read.format("kafka").option("kafka.bootstrap.servers", "127.0.0.1:1").option(
            "subscribe", "t"
        ).load()


def test_a_bad_since_is_one_line_and_a_non_zero_exit(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["analytics", "--bootstrap-server", "127.0.0.1:1", "--out", "/tmp/x", "--since", "yesterday"])
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--since 'yesterday'" in err


def test_an_unreachable_bootstrap_is_one_line_and_a_non_zero_exit(capsys: pytest.CaptureFixture[str]) -> None:
    # Port 1 on the loopback: nothing listens, so the connection is refused at once.
    assert main(["analytics", "--bootstrap-server", "127.0.0.1:1", "--out", "/tmp/x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("kcoord analytics: cannot reach 127.0.0.1:1:")


@pytest.mark.parametrize("module", ["pyspark", "pyarrow", "pandas", "matplotlib"])
def test_a_missing_extra_is_one_line_naming_what_to_install(
    module: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # None in sys.modules makes the import fail as if the package were not installed
    monkeypatch.setitem(sys.modules, module, None)
    assert main(["analytics", "--bootstrap-server", "127.0.0.1:1", "--out", "/tmp/x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"kcoord analytics: needs {module}:") and "pip install 'kcoord[analytics]'" in err


def test_no_java_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for module in ("pyspark", "pyarrow", "pandas", "matplotlib"):  # else the message names them first
        pytest.importorskip(module, reason="the [analytics] extra is not installed here")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert main(["analytics", "--bootstrap-server", "127.0.0.1:1", "--out", "/tmp/x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs Java 17" in err
