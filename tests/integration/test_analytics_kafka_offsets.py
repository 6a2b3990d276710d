"""kcoord's analytics over Apache Kafka's own ``__consumer_offsets``: groups coordinated by Kafka 4.0
itself (clients bootstrapped straight to Kafka, no kcoord), then ``kcoord analytics
--offsets-topic __consumer_offsets --events-topic ''`` against that cluster.

The workload, on one 4-partition topic of 40 records, with confluent-kafka (librdkafka) consumers
that commit after every record:
- classic group ``cl`` (range): static member s1 (group.instance.id ``s1``) joins and consumes all 40
  (generation 1, 40 commits), then dynamic member d1 joins (generation 2: 2 partitions each, 2 moved);
- KIP-848 group ``kg`` (``group.protocol=consumer``, Kafka's uniform assignor): k1 joins and consumes
  all 40 (assignment epoch 1, 40 commits), k2 joins (epoch 2: 2 + 2, 2 moved), k1 leaves (epoch 3:
  k2 owns all 4, 2 moved);
- KIP-848 group ``rx``: r1 subscribes by regular expression (Kafka writes a
  ConsumerGroupRegularExpression record, type 16) and consumes all 40, then classic member c1
  (``range``, the classic protocol) joins the consumer group (its member record carries
  ClassicMemberMetadata): the epoch bumps, 2 + 2, 2 moved;
- group ``tx``: a transactional producer commits offset 5 on every partition (TxnOffsetCommit,
  committed), then offset 9 in a transaction it aborts: Kafka keeps 5, and so must the pipeline
  (Kafka's topic holds both, the aborted ones followed by an abort marker).
What the pipeline reports from Kafka's records must match: the groups, their members (static or
not), each generation's owners and partitions, the commits and the last committed offsets.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from support.kafka_broker import KafkaBroker
from support.workload import create_topic, produce_numbered, unique, wait_until
from tests.support.fixtures import GROUP_HEARTBEAT_FLOOR_MS
from tests.support.members import CommittingMember

pytestmark = pytest.mark.integration
pytest.importorskip("pyspark", reason="pyspark is a test extra (pyproject.toml); not installed here")
confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is a test extra")

PARTITIONS = 4
RECORDS = 40


def heartbeat_every(bootstrap: str, ms: int, *groups: str) -> None:
    """Kafka's KIP-848 heartbeat interval for ``groups`` (a group config): each assignment change
    here reaches the members over heartbeats, 5 s apart by default."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    interval = ConfigEntry(
        "consumer.heartbeat.interval.ms", str(ms), incremental_operation=AlterConfigOpType.SET
    )
    resources = [ConfigResource(ResourceType.GROUP, g, incremental_configs=[interval]) for g in groups]
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until every answer came
    for future in admin.incremental_alter_configs(resources).values():
        future.result(30)


def transactional_commits(bootstrap: str, group: str, topic: str) -> None:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": unique("ak-txn")}
    )
    meta = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        producer.init_transactions(30)
        for offset, commit in ((5, True), (9, False)):
            producer.begin_transaction()
            tps = [confluent_kafka.TopicPartition(topic, p, offset) for p in range(PARTITIONS)]
            producer.send_offsets_to_transaction(tps, meta.consumer_group_metadata(), 30)
            (producer.commit_transaction if commit else producer.abort_transaction)(30)
    finally:
        meta.close()


@pytest.fixture(scope="module")
def report(kafka: KafkaBroker, spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    topic, cl, kg, tx, rx = unique("ak-t"), unique("ak-cl"), unique("ak-kg"), unique("ak-tx"), unique("ak-rx")
    # The KIP-848 groups' members learn each new target assignment at their next heartbeat: every
    # 0.5 s instead of Kafka's 5 s (the same assignments and epochs, seconds sooner).
    heartbeat_every(kafka.bootstrap, GROUP_HEARTBEAT_FLOOR_MS, kg, rx)
    create_topic(kafka.bootstrap, topic, PARTITIONS)
    produce_numbered(kafka.bootstrap, topic, RECORDS, PARTITIONS)
    classic = {
        "partition.assignment.strategy": "range",
        "session.timeout.ms": 10000,
        "heartbeat.interval.ms": 500,
    }
    members: dict[str, CommittingMember] = {}
    try:
        members["s1"] = CommittingMember(
            kafka.bootstrap, cl, topic, "s1", {**classic, "group.instance.id": "s1"}
        )
        members["k1"] = CommittingMember(kafka.bootstrap, kg, topic, "k1", {"group.protocol": "consumer"})
        # librdkafka reads a topic that starts with ^ as a regular expression
        members["r1"] = CommittingMember(
            kafka.bootstrap, rx, f"^{topic}$", "r1", {"group.protocol": "consumer"}
        )
        wait_until(lambda: all(members[m].consumed == RECORDS for m in ("s1", "k1", "r1")), 60,
                   "s1, k1 and r1 consuming everything")  # fmt: skip
        members["d1"] = CommittingMember(kafka.bootstrap, cl, topic, "d1", classic)
        members["k2"] = CommittingMember(kafka.bootstrap, kg, topic, "k2", {"group.protocol": "consumer"})
        members["c1"] = CommittingMember(kafka.bootstrap, rx, topic, "c1", classic)
        wait_until(lambda: all(len(members[m].assigned) == 2 for m in ("s1", "d1", "k1", "k2", "r1", "c1")), 60,
                   "2 partitions each in the three groups")  # fmt: skip
        members["k1"].close()
        wait_until(lambda: len(members["k2"].assigned) == PARTITIONS, 60, "k2 owning all after k1 left")
        ids = {name: mb.member_id for name, mb in members.items()}
    finally:
        for mb in members.values():
            mb.close()
    transactional_commits(kafka.bootstrap, tx, topic)
    out = tmp_path_factory.mktemp("analytics-kafka")
    from kcoord.analytics.run import run

    summary = run(argparse.Namespace(
        bootstrap_server=kafka.bootstrap, out=str(out), since=None, master="local[2]", events_topic="",
        offsets_topic="__consumer_offsets", source="python", input_parquet=None, no_report=False, lag_points=3,
    ))  # fmt: skip
    tables = {name: spark.read.parquet(str(out / name)).toPandas() for name in summary["rows"]}
    return {
        "summary": summary,
        "tables": tables,
        "topic": topic,
        "cl": cl,
        "kg": kg,
        "tx": tx,
        "rx": rx,
        "ids": ids,
        "bootstrap": kafka.bootstrap,
        "out": out,
    }


def test_every_record_of_kafkas_topic_decodes(report: dict[str, Any]) -> None:
    assert report["summary"]["rows"]["bad_offset_records"] == 0
    assert (Path(report["out"]) / "report.html").is_file()


def test_commits_and_last_committed_offsets(report: dict[str, Any]) -> None:
    commits, topic = report["tables"]["offset_commits"], report["topic"]
    for group in (report["cl"], report["kg"]):
        mine = commits[(commits["group"] == group) & (commits["topic"] == topic)]
        assert len(mine) == RECORDS  # one commit per record consumed
        last = mine.sort_values("ts").groupby("partition")["offset"].last().to_dict()
        assert last == {p: RECORDS // PARTITIONS for p in range(PARTITIONS)}
    lag = report["tables"]["lag"]
    final = (
        lag[lag["group"].isin([report["cl"], report["kg"]])]
        .sort_values("ts")
        .groupby(["group", "partition"])
        .tail(1)
    )
    assert len(final) == 2 * PARTITIONS and set(final["lag"]) == {0}


def test_aborted_transactional_commits_are_no_commits(report: dict[str, Any]) -> None:
    commits = report["tables"]["offset_commits"]
    mine = commits[commits["group"] == report["tx"]]
    assert sorted(zip(mine["partition"], mine["offset"], strict=True)) == [(p, 5) for p in range(PARTITIONS)]


def test_classic_generations_with_a_static_member(report: dict[str, Any]) -> None:
    ids, cl = report["ids"], report["cl"]
    moves = report["tables"]["generation_movement"]
    mine = moves[moves["group"] == cl].set_index("generation")
    assert mine.loc[1, "members_after"] == 1 and mine.loc[1, "static_members"] == 1
    assert mine.loc[1, "partitions_after"] == PARTITIONS
    two = mine.loc[2]
    assert (two["members_after"], two["members_in"], two["static_members"], two["moved"]) == (2, 1, 1, 2)
    assert two["protocol_class"] == "eager" and two["protocol"] == "range"
    gens = report["tables"]["generations"]
    row = gens[(gens["group"] == cl) & (gens["generation"] == 2)].iloc[0]
    assert (row["members"], row["partitions"], row["protocol_type"]) == (2, PARTITIONS, "consumer")
    assert ids["s1"].startswith("s1-") and ids["d1"].startswith("d1-")  # librdkafka's ids: client id + uuid


def test_kip848_assignment_epochs_as_generations(report: dict[str, Any]) -> None:
    kg = report["kg"]
    moves = report["tables"]["generation_movement"]
    mine = moves[moves["group"] == kg].sort_values("generation")
    first3 = mine[mine["generation"] <= 3]
    assert list(first3["generation"]) == [1, 2, 3]
    assert list(first3["members_after"]) == [1, 2, 1]
    assert list(first3["partitions_after"]) == [PARTITIONS] * 3
    assert list(first3["moved"]) == [0, 2, 2]
    assert set(first3["protocol_class"]) == {"kip848"}
    # When k2 left too, Kafka bumped the group epoch (4) but wrote no target assignment for an empty
    # group: the pipeline's generations are target assignment epochs, so 3 is the last.
    gens = report["tables"]["generations"]
    assert sorted(gens[gens["group"] == kg]["generation"]) == [1, 2, 3]


def test_a_regex_subscription_and_a_classic_member_in_a_kip848_group(report: dict[str, Any]) -> None:
    from kcoord.analytics import kafka_io
    from kcoord.protocol.records import decode_record

    rx = report["rx"]
    # Kafka's topic really holds both kinds of record for the group (else this proves nothing)
    kinds = set()
    for *_, key, value in kafka_io.read_all(report["bootstrap"], "__consumer_offsets"):
        rec = decode_record(key, value) if key is not None else None
        if rec is None or rec.value is None or getattr(rec.key, "group_id", None) != rx:
            continue
        name = type(rec.key).__name__
        if name == "ConsumerGroupRegularExpressionKey":
            kinds.add("regex")
        if name == "ConsumerGroupMemberMetadataKey" and rec.value.classic_member_metadata is not None:
            kinds.add("classic member")
    assert kinds == {"regex", "classic member"}
    moves = report["tables"]["generation_movement"]
    mine = moves[moves["group"] == rx].sort_values("generation")
    shown = mine[["lifetime", "generation", "protocol_class", "members_after", "moved"]].values.tolist()
    # When r1 left, c1 alone was a classic member: Kafka converted the group to a classic group
    # (an online downgrade: the consumer group's tombstone, then a GroupMetadata record whose
    # generation goes on from the epoch). One lifetime throughout; KIP-848 epochs, then classic.
    classes = list(mine["protocol_class"])
    assert classes[0] == "kip848" and classes == sorted(classes, key=lambda c: c != "kip848"), shown
    assert set(mine["lifetime"]) == {0}, shown
    # c1 joined: the first epoch with two members splits the 4 partitions, 2 moved from r1
    both = mine[mine["members_after"] == 2].iloc[0]
    assert (both["members_in"], both["partitions_after"], both["moved"]) == (1, PARTITIONS, 2)
