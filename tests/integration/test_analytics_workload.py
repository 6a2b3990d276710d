"""A scripted workload with known answers through a real kcoord, then the Spark pipeline over its
event topic (and its offsets topic), read back through kcoord with the Python data source.

The workload, on one 6-partition topic, with confluent-kafka (librdkafka) consumers:
- group ``st``: two static members join one at a time (2 rebalances), then 4 static restarts
  (close + a new consumer with the same group.instance.id): 0 more rebalances, 4 static rejoins;
- group ``rg`` (range): c1 joins, then c2, c3, c4 one at a time: 4 rebalances, the last 3 caused
  by the 3 joins; range moves 3, 3 and 1 partitions (members sort by id = client id + uuid);
- group ``cg`` (cooperative-sticky): the same joins: every join is two rebalances (KIP-429: revoke,
  then assign), 1 + 3 × 2 = 7; partitions moved (revoked) 3, 2 and 1;
- group ``kg`` (KIP-848, ``group.protocol=consumer``, server-side uniform assignor): the same joins,
  one target assignment each: 4 rebalances, moving 3, 2 and 1 partitions;
- 5 OffsetCommits to ``rg`` by an unknown member: 5 fenced commits (UNKNOWN_MEMBER_ID);
- group ``dg`` (range) lives twice under one name: d1 joins, d2 joins (3 moved), both leave, the
  group is deleted (DeleteGroups); then d3 joins and d4 joins (3 moved). Its second lifetime starts
  again at generation 1 and must not merge with the first (nothing moved by d3's join: nobody
  owned the partitions).

Then: the same event topic read as a stream (the Python data source's streaming reader) gives the
same records as the batch read; an empty topic gives a report that says so.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kcoord.protocol import messages as m
from support.kcoord_process import KcoordProcess
from support.workload import create_topic, produce_numbered, unique, wait_until
from tests.support.wire import WireClient

pytestmark = pytest.mark.integration
pytest.importorskip("pyspark", reason="pyspark is a test extra (pyproject.toml); not installed here")
confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is a test extra")

PARTITIONS = 6


@pytest.fixture(scope="module")
def kcoord() -> Iterator[KcoordProcess]:
    # KIP-848 members heartbeat every 0.5 s (the default is 5 s): each of group kg's joins waits for
    # the members to learn the new target, revoke and ack over heartbeats; the target assignments
    # (and so the rebalances and partitions moved that the tests count) are the same.
    with KcoordProcess(
        "--shards",
        "4",
        "--group-initial-rebalance-delay-ms",
        "0",
        "--events-partitions",
        "3",
        "--group-consumer-heartbeat-interval-ms",
        "500",
    ) as proc:
        yield proc


class Member:
    """A confluent-kafka consumer polled on its own thread; ``assigned`` is what it owns now."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topic: str,
        client_id: str,
        strategy: str,
        instance: str | None = None,
    ) -> None:
        conf: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": client_id,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
        if strategy == "kip848":
            conf["group.protocol"] = "consumer"
        else:
            conf.update(
                {
                    "partition.assignment.strategy": strategy,
                    "session.timeout.ms": 30000,
                    "heartbeat.interval.ms": 100,
                }
            )
        if instance is not None:
            conf["group.instance.id"] = instance
        self.consumer = confluent_kafka.Consumer(conf)
        self.assigned: set[int] = set()
        self.cooperative = strategy in ("cooperative-sticky", "kip848")
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _on_assign(self, consumer: Any, parts: list[Any]) -> None:
        if self.cooperative:
            self.assigned |= {p.partition for p in parts}
        else:
            self.assigned = {p.partition for p in parts}

    def _on_revoke(self, consumer: Any, parts: list[Any]) -> None:
        self.assigned -= {p.partition for p in parts}

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                self.consumer.poll(0.05)
            self.consumer.close()
        except BaseException as exc:
            self.errors.append(exc)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        assert not self.errors, self.errors


def settled(members: list[Member], sizes: list[int]) -> Callable[[], bool]:
    def check() -> bool:
        got = sorted(len(mb.assigned) for mb in members)
        union = set().union(*(mb.assigned for mb in members))
        return got == sorted(sizes) and len(union) == PARTITIONS

    return check


GROWTH = [[6], [3, 3], [2, 2, 2], [2, 2, 1, 1]]


def grow(
    bootstrap: str, group: str, topic: str, strategy: str, sizes: list[list[int]] = GROWTH, first: int = 1
) -> list[Member]:
    """Members c<first>, c<first+1>, ... join one at a time, each once the assignment is ``sizes[i]``."""
    members: list[Member] = []
    for i, sizes_now in enumerate(sizes):
        members.append(Member(bootstrap, group, topic, f"c{first + i}", strategy))
        wait_until(settled(members, sizes_now), 60, f"{group} with {i + 1} members")
        time.sleep(0.3)  # let the last generation's events leave the heartbeat path
    return members


def delete_group(bootstrap: str, group: str) -> None:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        results = admin.delete_groups([group])
    finally:
        admin.close()
    assert results == {group: "OK"}, results


def simple_commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    """A commit outside any generation (a "simple" group), of ``offset`` on every partition."""
    P = m.OffsetCommitRequest
    with WireClient(bootstrap) as client:
        req = P(
            group_id=group,
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=[
                P.OffsetCommitRequestTopic(
                    name=topic,
                    partitions=[
                        P.OffsetCommitRequestPartition(partition_index=p, committed_offset=offset)
                        for p in range(PARTITIONS)
                    ],
                )
            ],
        )
        resp = client.request(8, 8, req)
        assert {p.error_code for p in resp.topics[0].partitions} == {0}


def fenced_commits(bootstrap: str, group: str, topic: str, n: int) -> None:
    P = m.OffsetCommitRequest
    with WireClient(bootstrap) as client:
        for _ in range(n):
            req = P(group_id=group, generation_id_or_member_epoch=1, member_id="zombie-member", topics=[
                P.OffsetCommitRequestTopic(name=topic, partitions=[
                    P.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])])  # fmt: skip
            resp = client.request(8, 8, req)
            assert resp.topics[0].partitions[0].error_code != 0


def analytics_args(bootstrap: str, out: Path, events_topic: str, offsets_topic: str) -> argparse.Namespace:
    """``kcoord analytics`` over kcoord's topics with the Python source, 2 local cores, a report."""
    return argparse.Namespace(
        bootstrap_server=bootstrap,
        out=str(out),
        since=None,
        master="local[2]",
        events_topic=events_topic,
        offsets_topic=offsets_topic,
        source="python",
        input_parquet=None,
        no_report=False,
        lag_points=5,
    )


@pytest.fixture(scope="module")
def pipeline_out(
    kcoord: KcoordProcess, tmp_path_factory: pytest.TempPathFactory, spark: Any
) -> dict[str, Any]:
    topic = unique("an-t")
    create_topic(kcoord.bootstrap, topic, PARTITIONS)
    produce_numbered(kcoord.bootstrap, topic, 60, PARTITIONS)
    st, rg, cg, kg = unique("st"), unique("rg"), unique("cg"), unique("kg")
    # static group: two members, then 4 restarts
    statics = [Member(kcoord.bootstrap, st, topic, "s1", "range", instance="s1")]
    wait_until(settled(statics, [6]), 60, "static s1")
    statics.append(Member(kcoord.bootstrap, st, topic, "s2", "range", instance="s2"))
    wait_until(settled(statics, [3, 3]), 60, "static s1+s2")
    for restart in range(4):
        i = restart % 2
        before = set(statics[i].assigned)
        statics[i].close()
        statics[i] = Member(kcoord.bootstrap, st, topic, f"s{i + 1}", "range", instance=f"s{i + 1}")
        wait_until(lambda i=i, before=before: statics[i].assigned == before, 60, f"static restart {restart}")
    ranged = grow(kcoord.bootstrap, rg, topic, "range")
    coop = grow(kcoord.bootstrap, cg, topic, "cooperative-sticky")
    kip848 = grow(kcoord.bootstrap, kg, topic, "kip848")
    fenced_commits(kcoord.bootstrap, rg, topic, 5)
    dg = unique("dg")
    first_life = grow(kcoord.bootstrap, dg, topic, "range", sizes=[[6], [3, 3]])
    for mb in first_life:
        mb.close()
    delete_group(kcoord.bootstrap, dg)
    second_life = grow(kcoord.bootstrap, dg, topic, "range", sizes=[[6], [3, 3]], first=3)
    lag_group = unique("lg")
    simple_commit(kcoord.bootstrap, lag_group, topic, 4)
    time.sleep(2.5)  # the commit sums of a second are written once it is over (linger 0.2 s)
    scripted_until = int(time.time() * 1000)  # closing the members below makes them leave: more rebalances
    for mb in statics + ranged + coop + kip848 + second_life:
        mb.close()
    out = tmp_path_factory.mktemp("analytics")
    from kcoord.analytics.run import run

    args = analytics_args(kcoord.bootstrap, out, "__kcoord_events", "__kcoord_offsets")
    summary = run(args)
    tables = {name: spark.read.parquet(str(out / name)).toPandas() for name in summary["rows"]}
    reb = tables["rebalances"]
    tables["rebalances"] = reb[reb["completed_ts"] <= scripted_until]
    return {
        "summary": summary,
        "tables": tables,
        "groups": (st, rg, cg, kg),
        "recreated": dg,
        "out": out,
        "lag_group": lag_group,
    }


def test_static_restarts_cause_no_rebalance(pipeline_out: dict[str, Any]) -> None:
    st = pipeline_out["groups"][0]
    reb = pipeline_out["tables"]["rebalances"]
    assert len(reb[reb["group"] == st]) == 2
    churn = pipeline_out["tables"]["churn"]
    assert churn[churn["client_id"].isin(["s1", "s2"])]["static_rejoins"].sum() == 4


def test_joins_cause_known_rebalances_and_movement(pipeline_out: dict[str, Any]) -> None:
    _, rg, cg, kg = pipeline_out["groups"]
    reb = pipeline_out["tables"]["rebalances"].sort_values("generation")
    ranged, coop = reb[reb["group"] == rg], reb[reb["group"] == cg]
    assert len(ranged) == 4 and list(ranged["reason"]) == ["member_joined"] * 4
    assert list(ranged["moved"]) == [0, 3, 3, 1]
    assert set(ranged["protocol_class"]) == {"eager"}
    assert len(coop) == 7
    assert coop["moved"].sum() == 3 + 2 + 1
    assert set(coop["protocol_class"]) == {"cooperative"}
    kip848 = reb[reb["group"] == kg]
    assert len(kip848) == 4
    assert list(kip848["moved"]) == [0, 3, 2, 1]
    assert set(kip848["protocol_class"]) == {"kip848"}


def test_fenced_commits_counted(pipeline_out: dict[str, Any]) -> None:
    rg = pipeline_out["groups"][1]
    f = pipeline_out["tables"]["fencing"]
    commits = f[(f["source"] == "commits") & (f["group"] == rg) & (f["outcome"] == "fenced")]
    assert commits["n"].sum() == 5
    assert set(commits["mode"]) == {"classic:generation"}


def test_offsets_topic_and_report(pipeline_out: dict[str, Any]) -> None:
    summary, out = pipeline_out["summary"], pipeline_out["out"]
    assert summary["source"] == "python"
    assert summary["rows"]["bad_events"] == 0
    assert summary["rows"]["generations"] >= 4  # group metadata records of the offsets topic
    assert summary["rows"]["shard_loads"] >= 4
    plots = summary["plots"]
    assert len(plots) >= 6
    for png in plots:
        assert Path(png).stat().st_size > 2000
    assert (Path(out) / "report.html").read_text().count("<img") == len(plots)


def test_streaming_read_gives_the_batch_records(
    kcoord: KcoordProcess, spark: Any, pipeline_out: dict[str, Any], tmp_path: Path
) -> None:
    batch = (
        spark.read.format("kcoord_kafka")
        .option("bootstrap", kcoord.bootstrap)
        .option("topic", "__kcoord_events")
        .load()
    )
    stream = (
        spark.readStream.format("kcoord_kafka")
        .option("bootstrap", kcoord.bootstrap)
        .option("topic", "__kcoord_events")
        .load()
    )
    query = (
        stream.writeStream.format("parquet")
        .option("path", str(tmp_path / "stream"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    streamed = spark.read.parquet(str(tmp_path / "stream"))
    batch_rows = {(r.partition, r.offset) for r in batch.select("partition", "offset").collect()}
    stream_rows = {(r.partition, r.offset) for r in streamed.select("partition", "offset").collect()}
    assert len(batch_rows) >= pipeline_out["summary"]["rows"]["events"]
    # the stream stops at the end offsets listed when it started; kcoord may have written since
    assert stream_rows and stream_rows <= batch_rows
    assert batch.rdd.getNumPartitions() == 3  # one Spark partition per topic partition


def test_an_empty_topic_gives_an_empty_report(kcoord: KcoordProcess, spark: Any, tmp_path: Path) -> None:
    topic = unique("an-empty")
    create_topic(kcoord.bootstrap, topic, 2)
    from kcoord.analytics.run import run

    summary = run(analytics_args(kcoord.bootstrap, tmp_path, topic, ""))
    assert summary["rows"]["events"] == 0 and summary["plots"] == []
    assert "No events" in (tmp_path / "report.html").read_text()


def test_bad_records_in_the_topic_are_counted_and_never_numbers(
    kcoord: KcoordProcess, spark: Any, tmp_path: Path
) -> None:
    """Records a real producer wrote to an event topic: one good rebalance, then the bad inputs an
    operator met (non-UTF-8 bytes, a string ts, a negative duration, a fenced count that is a
    word). The good one is the only rebalance; the others are counted by problem in the report."""
    import json

    topic = unique("an-bad")
    create_topic(kcoord.bootstrap, topic, 1)
    now = int(time.time() * 1000)
    completed = {"v": 1, "type": "rebalance_completed", "ts": now, "shard": 0, "group": "g",
                 "generation": 1, "duration_ms": 100, "members": 1, "protocol": "range"}  # fmt: skip
    sums = {"v": 1, "type": "commits", "ts": now, "shard": 0, "group": "g", "count": 1, "requests": 1,
            "fenced": {"ILLEGAL_GENERATION": "lots"}, "rejected": {}, "mode": "classic:generation"}  # fmt: skip
    values = [
        json.dumps(completed).encode(),
        b"\x00\x01garbage\xff\xfe",
        json.dumps({**completed, "generation": 2, "ts": "abc"}).encode(),
        json.dumps({**completed, "generation": 3, "duration_ms": -5}).encode(),
        json.dumps(sums).encode(),
    ]
    producer = confluent_kafka.Producer({"bootstrap.servers": kcoord.bootstrap})
    for value in values:
        producer.produce(topic, value=value, key=b"g")
    assert producer.flush(30) == 0
    from kcoord.analytics.run import run

    summary = run(analytics_args(kcoord.bootstrap, tmp_path, topic, ""))
    bad = spark.read.parquet(str(tmp_path / "bad_events")).toPandas().sort_values("offset")
    assert list(bad["problem"]) == ["not_utf8", "wrong_type", "out_of_range", "wrong_type"]
    rebalances = spark.read.parquet(str(tmp_path / "rebalances")).toPandas()
    assert list(rebalances["generation"]) == [1] and list(rebalances["duration_ms"]) == [100]
    assert summary["rows"]["commits"] == 0
    report = (tmp_path / "report.html").read_text()
    assert f"{topic}: 4 records were skipped." in report and "not_utf8" in report


def test_a_missing_events_topic_is_one_line_and_a_non_zero_exit(
    kcoord: KcoordProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kcoord.analytics.run import main

    topic = unique("an-typo")
    assert (
        main(["--bootstrap-server", kcoord.bootstrap, "--out", str(tmp_path), "--events-topic", topic]) == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"the events topic '{topic}' does not exist" in err
    assert not (tmp_path / "report.html").exists()


def test_lag_from_committed_offsets_and_end_offsets(pipeline_out: dict[str, Any]) -> None:
    group = pipeline_out["lag_group"]
    lag = pipeline_out["tables"]["lag"]
    mine = lag[lag["group"] == group]
    assert set(mine["partition"]) == set(range(PARTITIONS))
    assert set(mine["committed"]) == {4}
    last = mine.sort_values("ts").groupby("partition").tail(1)
    assert (last["end_offset"] >= 4).all()
    assert (last["lag"] == last["end_offset"] - 4).all()
    commits = pipeline_out["tables"]["offset_commits"]
    assert len(commits[commits["group"] == group]) == PARTITIONS


def test_a_recreated_group_is_a_new_lifetime(pipeline_out: dict[str, Any]) -> None:
    dg = pipeline_out["recreated"]
    reb = pipeline_out["tables"]["rebalances"]
    mine = reb[reb["group"] == dg].sort_values(["lifetime", "generation"])
    lives = {life: g for life, g in mine.groupby("lifetime")}
    assert sorted(lives) == [0, 1]
    for life in (0, 1):  # each starts at generation 1 with nothing moved, then d2/d4 take 3
        joins = lives[life][lives[life]["reason"] == "member_joined"].head(2)
        assert joins[["generation", "partitions_before", "moved"]].values.tolist() == [[1, 0, 0], [2, 6, 3]]
    assert lives[1]["moved"].sum() == 3  # the second lifetime moved 3, not its predecessor's too
