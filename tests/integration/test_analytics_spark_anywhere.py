"""The analytics pipeline where Spark runs: incremental runs, spark-submit, Spark Connect.

Events are written to a fresh topic through a real kcoord by a real producer (confluent-kafka):
group ``g`` rebalances (started, completed and assignment events, generations 1, 2, ...), a commit
sum per rebalance, and one record that is not an event. Each run's tables are checked against
those counts.

- ``--incremental``: a first run reads everything; a second over the unchanged topic reads nothing
  and touches no file; after more events, a third reads exactly them, appends their rows and
  rebuilds the rebalances (one started in the first batch and completed in the second is paired).
  A run stopped before its checkpoint leaves rows the rebuilt tables count once; an events table an
  older kcoord wrote is written again.
- ``spark-submit --master local[2]`` (pyspark's own), with kcoord shipped to the executors as a
  zip (``--py-files``): the Python workers run an interpreter that cannot import kcoord otherwise.
- Spark Connect: a local Spark Connect server (pyspark's bundled ``SparkConnectServer``) and the
  CLI as its client (``--remote``), which rules out RDDs and ``_jvm`` calls in the pipeline.

The last two start a JVM each: run with ``KCOORD_TEST_SPARK_DEPLOY=1``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.kcoord_process import KcoordProcess
from support.workload import create_topic, unique

pytestmark = pytest.mark.integration
pytest.importorskip("pyspark", reason="pyspark is a test extra (pyproject.toml); not installed here")
confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is a test extra")

SRC = Path(__file__).resolve().parents[2] / "src"
GROUP = "g"
# Each of these starts a JVM of its own (spark-submit's, a Spark Connect server's) besides the
# suite's: about a minute each on 2 shared cores, more than the default run's budget allows.
deploy_runs = pytest.mark.skipif(
    os.environ.get("KCOORD_TEST_SPARK_DEPLOY") != "1",
    reason="starts its own Spark JVM (~1 min on 2 cores): set KCOORD_TEST_SPARK_DEPLOY=1 to run it",
)


@pytest.fixture(scope="module")
def kcoord() -> Iterator[KcoordProcess]:
    with KcoordProcess("--group-initial-rebalance-delay-ms", "0") as proc:
        yield proc


def event_values(first_generation: int, rebalances: int, open_last: bool = False) -> list[bytes]:
    """``rebalances`` rebalances of group g (started, completed, assignment, and a commit sum each);
    ``open_last``: the last one only starts (its completion comes in the next batch)."""
    now = int(time.time() * 1000)
    base = {"v": 1, "shard": 0, "group": GROUP}
    out = []
    for i in range(rebalances):
        gen = first_generation + i
        ts = now + i
        out.append({**base, "type": "rebalance_started", "ts": ts, "reason": f"r{gen}", "generation": gen - 1,
                    "members": 1})  # fmt: skip
        if open_last and i == rebalances - 1:
            break
        out += completion(gen, ts + 1)
    return [json.dumps(e).encode() for e in out]


def completion(gen: int, ts: int) -> list[dict[str, Any]]:
    base = {"v": 1, "shard": 0, "group": GROUP}
    return [
        {**base, "type": "rebalance_completed", "ts": ts, "generation": gen, "duration_ms": 10, "members": 1,
         "protocol": "range"},
        {**base, "type": "assignment", "ts": ts, "generation": gen, "protocol_type": "consumer",
         "protocol": "range", "members": 1,
         "assignment": [{"member": "m1", "instance": None, "bytes": 10, "partitions": ["t:0", "t:1"]}]},
        {**base, "type": "commits", "ts": ts, "count": 2, "requests": 1, "fenced": {}, "rejected": {},
         "mode": "classic:generation"},
    ]  # fmt: skip


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value=value, key=GROUP.encode())
    assert producer.flush(30) == 0


def files_under(directory: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(directory)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in directory.rglob("*")
        if p.is_file()
    }


def args_for(kcoord: KcoordProcess, topic: str, out: str, **extra: Any) -> argparse.Namespace:
    return argparse.Namespace(
        **{
            "bootstrap_server": kcoord.bootstrap,
            "out": out,
            "since": None,
            "master": "local[2]",
            "events_topic": topic,
            "offsets_topic": "",
            "source": "python",
            "input_parquet": None,
            "no_report": True,
            "lag_points": 3,
            **extra,
        }
    )


@pytest.mark.timeout(900)  # three pipeline runs in one test (minutes on a loaded 2-core machine)
def test_incremental_runs_read_only_what_arrived(kcoord: KcoordProcess, spark: Any, tmp_path: Path) -> None:
    from kcoord.analytics.run import run

    topic = unique("an-inc")
    create_topic(kcoord.bootstrap, topic, 2)
    first = event_values(1, 3, open_last=True)  # generations 1, 2 done; 3 started
    produce(kcoord.bootstrap, topic, first + [b"not an event"])
    out = tmp_path / "out"
    summary = run(args_for(kcoord, topic, str(out), incremental=True))
    assert summary["records_read"] == len(first) + 1
    assert summary["rows"]["events"] == len(first) and summary["rows"]["bad_events"] == 1
    assert summary["rows"]["rebalances"] == 2
    days = {p.name for p in (out / "events").iterdir() if p.is_dir()}
    assert days == {time.strftime("date=%Y-%m-%d", time.gmtime())}  # partitioned by (UTC) date

    before = files_under(out)
    again = run(args_for(kcoord, topic, str(out), incremental=True))
    assert again["no_work"] and again["records_read"] == 0 and sum(again["offsets_to_read"].values()) == 0
    assert files_under(out) == before  # no table, checkpoint or stored record touched

    second = [json.dumps(e).encode() for e in completion(3, int(time.time() * 1000))]
    second += event_values(4, 1)
    produce(kcoord.bootstrap, topic, second)
    third = run(args_for(kcoord, topic, str(out), incremental=True))
    assert third["records_read"] == len(second)
    assert third["rows"]["events"] == len(first) + len(second)  # appended: each record once
    assert third["rows"]["bad_events"] == 1 and third["rows"]["commits"] == 4
    rebalances = spark.read.parquet(str(out / "rebalances")).toPandas().sort_values("generation")
    # generation 3 started in the first run and completed in this one: paired, with its reason
    assert list(rebalances["generation"]) == [1, 2, 3, 4]
    assert list(rebalances["reason"]) == ["r1", "r2", "r3", "r4"]
    movement = spark.read.parquet(str(out / "movement")).toPandas().sort_values("generation")
    # the same owner every generation: only the first assigns from nobody, also across the runs
    assert list(movement["assigned_from_nobody"]) == [2, 0, 0, 0]


def rebuilt_tables(spark: Any, out: Path) -> tuple[list[int], list[int]]:
    """(rebalances' generations, movement's partitions assigned from nobody), by generation."""
    rebalances = spark.read.parquet(str(out / "rebalances")).toPandas().sort_values("generation")
    movement = spark.read.parquet(str(out / "movement")).toPandas().sort_values("generation")
    return list(rebalances["generation"]), list(movement["assigned_from_nobody"])


@pytest.mark.timeout(900)  # four pipeline runs in one test
def test_incremental_runs_count_a_stopped_runs_rows_once_and_rewrite_an_older_events_table(
    kcoord: KcoordProcess, spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The events table is appended in the parse's own pass and the rebuilt tables read it. A run
    that stops before its checkpoint leaves its rows there: the next run reads those records again,
    and each counts once in the rebuilt tables. An events table without the fields the others read
    (as an older kcoord wrote it) is written again from every record read so far."""
    from kcoord.analytics import checkpoint, tables
    from kcoord.analytics.run import run

    topic = unique("an-inc-stop")
    create_topic(kcoord.bootstrap, topic, 2)
    first = event_values(1, 2)
    produce(kcoord.bootstrap, topic, first)
    out = tmp_path / "out"
    assert run(args_for(kcoord, topic, str(out), incremental=True))["rows"]["rebalances"] == 2

    second = event_values(3, 1)
    produce(kcoord.bootstrap, topic, second)

    def stop(*_: Any) -> None:
        raise RuntimeError("stopped before the checkpoint")

    with monkeypatch.context() as patched:
        patched.setattr(checkpoint, "commit", stop)
        with pytest.raises(RuntimeError, match="stopped before the checkpoint"):
            run(args_for(kcoord, topic, str(out), incremental=True))
    assert spark.read.parquet(str(out / "events")).count() == len(first) + len(second)  # its rows stay
    again = run(args_for(kcoord, topic, str(out), incremental=True))
    assert again["records_read"] == len(second)  # the stopped run's records, read again
    assert again["rows"]["events"] == len(first) + 2 * len(second)  # appended twice (docs/analytics.md)
    assert rebuilt_tables(spark, out) == ([1, 2, 3], [2, 0, 0])  # each record once

    # An older kcoord's events table: without the fields the rebuilt tables read.
    older = spark.createDataFrame(
        spark.read.parquet(str(out / "events")).drop("assignment", "fenced", "rejected", "date").toPandas()
    )
    tables.write_table(spark, older, str(out), "events", "overwrite")
    third = event_values(4, 1)
    produce(kcoord.bootstrap, topic, third)
    last = run(args_for(kcoord, topic, str(out), incremental=True))
    assert last["records_read"] == len(third)
    events = spark.read.parquet(str(out / "events"))
    assert "assignment" in events.columns
    # written again from the committed runs' records and this one's: each once
    assert last["rows"]["events"] == len(first) + len(second) + len(third) == events.count()
    assert rebuilt_tables(spark, out) == ([1, 2, 3, 4], [2, 0, 0, 0])
    assert last["rows"]["commits"] == 4  # rewritten with the events table, not appended


def kcoord_zip(directory: Path) -> Path:
    """kcoord's Python package as a zip for ``--py-files`` (no compiled module: its decoders fall
    back to pure Python)."""
    path = directory / "kcoord.zip"
    with zipfile.ZipFile(path, "w") as zf:
        for f in (SRC / "kcoord").rglob("*.py"):
            zf.write(f, str(f.relative_to(SRC)))
    return path


def python_without_kcoord(directory: Path) -> Path:
    """An interpreter that sees this environment's libraries (pyarrow, pandas, pyspark) but not
    kcoord: a venv whose path names the site-packages directory without running its .pth files
    (kcoord is installed editable, through one)."""
    import site
    import venv

    venv.create(directory, with_pip=False)
    python = directory / "bin" / "python"
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    Path(out.stdout.strip(), "libraries.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return python


def spark_bin(name: str) -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / name)


@deploy_runs
def test_spark_submit_ships_kcoord_to_the_executors(kcoord: KcoordProcess, tmp_path: Path) -> None:
    topic = unique("an-submit")
    create_topic(kcoord.bootstrap, topic, 2)
    values = event_values(1, 3)
    produce(kcoord.bootstrap, topic, values)
    worker_python = python_without_kcoord(tmp_path / "worker-env")
    probe = subprocess.run([str(worker_python), "-c", "import pyarrow, pandas; import kcoord"],
                           capture_output=True, text=True)  # fmt: skip
    assert "No module named 'kcoord'" in probe.stderr  # the workers can only get it from --py-files
    env = {**os.environ, "PYSPARK_PYTHON": str(worker_python), "PYSPARK_DRIVER_PYTHON": sys.executable}
    out = tmp_path / "out"
    main_script = SRC / "kcoord" / "analytics" / "__main__.py"
    result = subprocess.run(
        [spark_bin("spark-submit"), "--master", "local[2]", "--py-files", str(kcoord_zip(tmp_path)),
         "--conf", "spark.ui.enabled=false", str(main_script),
         "--bootstrap-server", kcoord.bootstrap, "--events-topic", topic, "--offsets-topic", "",
         "--source", "python", "--out", f"file://{out}", "--report-dir", str(tmp_path / "report")],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "rebalances=3" in result.stdout and f"events={len(values)}" in result.stdout
    assert (out / "rebalances").is_dir() and (tmp_path / "report" / "report.html").exists()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def spark_connect_server(tmp_path: Path) -> Iterator[str]:
    import pyspark

    pytest.importorskip("grpc", reason="Spark Connect's client needs pyspark[connect] (grpcio): a test extra")
    jars = Path(pyspark.__file__).parent / "jars"
    if not list(jars.glob("spark-connect_*.jar")):
        pytest.skip(f"this pyspark has no Spark Connect server jar in {jars} (pyspark >= 4.0 bundles it)")
    port = free_port()
    log = (tmp_path / "connect-server.log").open("w")
    server = subprocess.Popen(
        [spark_bin("spark-submit"), "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
         "--master", "local[2]", "--conf", f"spark.connect.grpc.binding.port={port}",
         "--conf", "spark.ui.enabled=false"],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, (tmp_path / "connect-server.log").read_text()[-3000:]
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the Spark Connect server did not listen in 120 s"
                time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@deploy_runs
def test_the_pipeline_runs_under_spark_connect(
    kcoord: KcoordProcess, spark_connect_server: str, tmp_path: Path
) -> None:
    topic = unique("an-connect")
    create_topic(kcoord.bootstrap, topic, 2)
    values = event_values(1, 3)
    produce(kcoord.bootstrap, topic, values)
    commit_offset(kcoord.bootstrap, topic)
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "kcoord.analytics", "--remote", spark_connect_server,
         "--bootstrap-server", kcoord.bootstrap, "--events-topic", topic,
         "--offsets-topic", "__kcoord_offsets", "--source", "auto", "--out", str(out), "--incremental"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "rebalances=3" in result.stdout and f"events={len(values)}" in result.stdout
    # the offsets topic went through the Arrow decoder (mapInArrow) on the server's workers
    assert "offset_commits=" in result.stdout and "offset_commits=0" not in result.stdout
    assert (out / "report.html").exists() and (out / "_checkpoint").is_dir()
    shutil.rmtree(out / "_raw")  # a second run must not need the stored records: nothing arrived
    again = subprocess.run(
        [sys.executable, "-m", "kcoord.analytics", "--remote", spark_connect_server,
         "--bootstrap-server", kcoord.bootstrap, "--events-topic", topic, "--offsets-topic", "",
         "--out", str(out), "--incremental", "--no-report"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    assert "nothing arrived since the last run" in again.stdout


def commit_offset(bootstrap: str, topic: str) -> None:
    """One OffsetCommit (a simple consumer: assigned, not subscribed) to kcoord's offsets topic."""
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique("an-commit"), "enable.auto.commit": False}
    )
    try:
        consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, 0, 2)], asynchronous=False)
    finally:
        consumer.close()
