"""Apache Kafka 4.0's own command-line tools against kcoord, on each upstream (tansu and Kafka).

The tools are Java kafka-clients 4.0 admin clients and consumers: ``kafka-consumer-groups.sh`` and
``kafka-groups.sh`` bootstrap to kcoord and see the groups kcoord coordinates;
``kafka-console-consumer.sh`` with Kafka's own ``OffsetsMessageFormatter`` and
``GroupMetadataMessageFormatter`` reads kcoord's internal topic straight from the upstream, which
proves the records kcoord stores are Kafka's ``__consumer_offsets`` formats.

One kcoord per upstream (module scope) and one workload on it:
- topic T, 3 partitions, 10 records each (one record per produce batch: tansu lists a wrong end
  offset for batches of several records, docs/tansu.md, and the lag columns read it);
- classic group C (range): a static member (group.instance.id ``tools-static``) and a dynamic one,
  confluent-kafka, each commits what it consumed, and both stay in the group while described;
- KIP-848 group K (``group.protocol=consumer``): one confluent-kafka member that consumed and committed;
- group R for the offset tools: a kafka-python member consumed all, committed, and left (Empty).

Each Kafka tool run is a JVM start (1-3 s on these machines): the tests batch groups into one run
where the tool takes several.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

from support.kafka_broker import KafkaBroker, KafkaUnavailable, require_java
from support.kcoord_process import KcoordProcess
from support.workload import create_topic, unique, wait_until
from tests.support.fixtures import Upstream
from tests.support.members import CommittingMember

pytestmark = pytest.mark.integration
confluent_kafka = pytest.importorskip("confluent_kafka", reason="confluent-kafka is a test extra")

PARTITIONS = 3
PER_PARTITION = 10
STATIC_ID = "tools-static"


@dataclass
class Workload:
    kcoord: KcoordProcess
    upstream: Upstream
    tools: KafkaBroker  # only its tool() runner (Kafka's bin/) is used, against any bootstrap
    internal_topic: str
    topic: str
    classic: str
    kip848: str
    reset: str
    members: dict[str, CommittingMember]


def produce_one_per_batch(bootstrap: str, topic: str) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    for i in range(PARTITIONS * PER_PARTITION):
        producer.send(topic, value=b"v%03d" % i, partition=i % PARTITIONS).get(30)
    producer.close()


def committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets, read through ``bootstrap`` (OffsetFetch)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        offsets = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    return {(tp.topic, tp.partition): om.offset for tp, om in offsets.items()}


def table(output: str, first_column: str) -> list[dict[str, str]]:
    """The rows of every table in a tool's output whose header starts with ``first_column``.

    The tools print tables aligned on the header's columns and leave an empty cell blank (a
    dynamic member's GROUP-INSTANCE-ID), so a cell is the text under its header word."""
    rows: list[dict[str, str]] = []
    header: list[tuple[str, int]] | None = None
    for line in output.splitlines():
        if not line.strip():
            header = None
        elif line.split()[0] == first_column:
            header = [(m.group(), m.start()) for m in re.finditer(r"\S+", line)]
        elif header is not None:
            ends = [start for _, start in header[1:]] + [len(line)]
            rows.append(
                {name: line[start:end].strip() for (name, start), end in zip(header, ends, strict=True)}
            )
    return rows


@pytest.fixture(scope="module")
def workload(upstream: Upstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workload]:
    try:
        require_java()
        # The tools run from Kafka's distribution whichever upstream is under test; no broker is started.
        tools = (
            upstream
            if isinstance(upstream, KafkaBroker)
            else KafkaBroker(log_dir=tmp_path_factory.mktemp("tools"))
        )
    except KafkaUnavailable as exc:
        pytest.skip(str(exc))
    internal = unique("__kcoord_tools")
    # One shard, so the internal topic has one partition: the console consumer reads it with
    # --partition 0 and no group (subscribed through tansu's group coordinator, the Java 4.0
    # console consumer reads nothing in 25 s; docs/tansu.md).
    kcoord = KcoordProcess("--shards", "1", "--storage", "kafka", "--internal-topic", internal,
                           "--group-initial-rebalance-delay-ms", "0", bootstrap=upstream.bootstrap).start()  # fmt: skip
    members: dict[str, CommittingMember] = {}
    try:
        topic = unique("tools-t")
        create_topic(kcoord.bootstrap, topic, PARTITIONS)
        produce_one_per_batch(kcoord.bootstrap, topic)
        classic, kip848, reset = unique("tools-classic"), unique("tools-kip848"), unique("tools-reset")
        classic_conf = {"partition.assignment.strategy": "range", "session.timeout.ms": 30000,
                        "heartbeat.interval.ms": 500}  # fmt: skip
        members["static"] = CommittingMember(kcoord.bootstrap, classic, topic, "tools-static-client",
                                   {**classic_conf, "group.instance.id": STATIC_ID})  # fmt: skip
        wait_until(
            lambda: members["static"].assigned == set(range(PARTITIONS)), 60, "the static member's assignment"
        )
        members["dynamic"] = CommittingMember(
            kcoord.bootstrap, classic, topic, "tools-dynamic-client", classic_conf
        )
        members["kip848"] = CommittingMember(
            kcoord.bootstrap, kip848, topic, "tools-kip848-client", {"group.protocol": "consumer"}
        )
        total = PARTITIONS * PER_PARTITION
        wait_until(
            lambda: (
                len(members["static"].assigned | members["dynamic"].assigned) == PARTITIONS
                and members["static"].assigned
                and members["dynamic"].assigned
            ),
            60,
            "the classic group's 2 members",
        )
        wait_until(lambda: members["kip848"].consumed == total, 60, "the KIP-848 member's records")
        wait_until(lambda: committed(kcoord.bootstrap, classic) == {(topic, p): PER_PARTITION for p in range(PARTITIONS)},
                   60, "the classic group's commits")  # fmt: skip

        # Group R: consume everything, commit, leave (LeaveGroup): Empty with offsets, as the reset tool needs.
        consumer = KafkaConsumer(topic, bootstrap_servers=kcoord.bootstrap, group_id=reset, enable_auto_commit=False,
                                 auto_offset_reset="earliest", consumer_timeout_ms=10000)  # fmt: skip
        assert sum(1 for _ in consumer) == total
        consumer.commit()
        consumer.close()
        assert committed(kcoord.bootstrap, reset) == {(topic, p): PER_PARTITION for p in range(PARTITIONS)}
        yield Workload(kcoord, upstream, tools, internal, topic, classic, kip848, reset, members)
    finally:
        for member in members.values():
            member.close()
        kcoord.stop()
        kcoord.kill()


def consumer_groups(w: Workload, *args: str) -> str:
    return w.tools.tool("kafka-consumer-groups.sh", "--bootstrap-server", w.kcoord.bootstrap, *args).stdout


def test_describe_members_verbose_offsets_and_state(workload: Workload) -> None:
    w = workload
    static, dynamic, kip848 = w.members["static"], w.members["dynamic"], w.members["kip848"]
    groups = ("--group", w.classic, "--group", w.kip848)
    members = table(consumer_groups(w, "--describe", *groups, "--members", "--verbose"), "GROUP")
    by_id = {row["CONSUMER-ID"]: row for row in members}
    assert set(by_id) == {static.member_id, dynamic.member_id, kip848.member_id}, members

    def assignment(member: CommittingMember) -> str:
        return f"{w.topic}:{','.join(str(p) for p in sorted(member.assigned))}"

    for member, client_id, instance in ((static, "tools-static-client", STATIC_ID),
                                        (dynamic, "tools-dynamic-client", ""),
                                        (kip848, "tools-kip848-client", "")):  # fmt: skip
        row = by_id[member.member_id]
        assert row["CLIENT-ID"] == client_id
        assert row.get("GROUP-INSTANCE-ID", "") == instance  # the column is left out when no member has one
        assert row["HOST"] == "/127.0.0.1"
        assert row["#PARTITIONS"] == str(len(member.assigned))
    for member in (static, dynamic):
        assert by_id[member.member_id]["GROUP"] == w.classic
        row = by_id[member.member_id]
        # a classic member has no epochs: the tool prints "-" and its assignment as the current one
        assert row["CURRENT-ASSIGNMENT"] == assignment(member)
        assert row["CURRENT-EPOCH"] == row["TARGET-EPOCH"] == "-" and row["TARGET-ASSIGNMENT"] == "-"
    row = by_id[kip848.member_id]
    assert row["GROUP"] == w.kip848
    # a KIP-848 member's row has its epochs and its current and target assignments
    assert row["CURRENT-ASSIGNMENT"] == row["TARGET-ASSIGNMENT"] == assignment(kip848)
    assert int(row["CURRENT-EPOCH"]) == int(row["TARGET-EPOCH"]) >= 1

    offsets = table(consumer_groups(w, "--describe", *groups, "--offsets"), "GROUP")
    assert len(offsets) == 2 * PARTITIONS
    for row in offsets:
        assert row["TOPIC"] == w.topic
        assert row["CURRENT-OFFSET"] == row["LOG-END-OFFSET"] == str(PER_PARTITION), row
        assert row["LAG"] == "0"
        owner = static if row["GROUP"] == w.classic and int(row["PARTITION"]) in static.assigned else None
        owner = owner or (dynamic if row["GROUP"] == w.classic else kip848)
        assert row["CONSUMER-ID"] == owner.member_id and row["CLIENT-ID"].startswith("tools-")

    state = {
        row["GROUP"]: row for row in table(consumer_groups(w, "--describe", *groups, "--state"), "GROUP")
    }
    assert state[w.classic]["ASSIGNMENT-STRATEGY"] == "range"
    assert state[w.classic]["STATE"] == "Stable" and state[w.classic]["#MEMBERS"] == "2"
    assert state[w.kip848]["ASSIGNMENT-STRATEGY"] == "uniform"
    assert state[w.kip848]["STATE"] == "Stable" and state[w.kip848]["#MEMBERS"] == "1"
    for row in state.values():
        assert row["COORDINATOR"].startswith(f"{w.kcoord.bootstrap.split(':')[0]}:")  # (ID): kcoord's address


def test_reset_offsets_and_delete_offsets(workload: Workload) -> None:
    w = workload
    group = ("--group", w.reset, "--topic", w.topic)
    earliest = table(consumer_groups(w, "--reset-offsets", *group, "--to-earliest", "--execute"), "GROUP")
    assert sorted((int(r["PARTITION"]), r["NEW-OFFSET"]) for r in earliest) == [
        (p, "0") for p in range(PARTITIONS)
    ]
    assert committed(w.kcoord.bootstrap, w.reset) == {(w.topic, p): 0 for p in range(PARTITIONS)}

    to_offset = table(consumer_groups(w, "--reset-offsets", *group, "--to-offset", "7", "--execute"), "GROUP")
    assert {r["NEW-OFFSET"] for r in to_offset} == {"7"} and len(to_offset) == PARTITIONS
    assert committed(w.kcoord.bootstrap, w.reset) == {(w.topic, p): 7 for p in range(PARTITIONS)}

    # A group with members cannot be reset (Kafka's tool checks the state DescribeGroups gives).
    refused = w.tools.tool("kafka-consumer-groups.sh", "--bootstrap-server", w.kcoord.bootstrap, "--reset-offsets",
                           "--group", w.classic, "--topic", w.topic, "--to-earliest", "--execute", check=False)  # fmt: skip
    assert f"can only be reset if the group '{w.classic}' is inactive, but the current state is Stable" in (
        refused.stdout + refused.stderr
    )

    deleted = table(consumer_groups(w, "--delete-offsets", *group), "TOPIC")
    assert sorted((int(r["PARTITION"]), r["STATUS"]) for r in deleted) == [
        (p, "Successful") for p in range(PARTITIONS)
    ]
    assert committed(w.kcoord.bootstrap, w.reset) == {}


def test_groups_list_with_type_and_protocol_filters(workload: Workload) -> None:
    w = workload
    listed = {r["GROUP"]: r for r in table(w.tools.tool("kafka-groups.sh", "--bootstrap-server", w.kcoord.bootstrap,
                                                         "--list").stdout, "GROUP")}  # fmt: skip
    assert listed[w.classic] == {"GROUP": w.classic, "TYPE": "Classic", "PROTOCOL": "consumer"}
    assert listed[w.kip848] == {"GROUP": w.kip848, "TYPE": "Consumer", "PROTOCOL": "consumer"}
    assert listed[w.reset]["TYPE"] == "Classic"
    only_new = w.tools.tool("kafka-groups.sh", "--bootstrap-server", w.kcoord.bootstrap, "--list",
                            "--group-type", "consumer").stdout  # fmt: skip
    names = {r["GROUP"] for r in table(only_new, "GROUP")}
    assert w.kip848 in names and w.classic not in names and w.reset not in names
    # --consumer: consumer groups of both protocols (classic ones by their protocol type "consumer")
    consumers = w.tools.tool(
        "kafka-groups.sh", "--bootstrap-server", w.kcoord.bootstrap, "--list", "--consumer"
    ).stdout
    names = {r["GROUP"] for r in table(consumers, "GROUP")}
    assert {w.kip848, w.classic, w.reset} <= names


def console_consumer(w: Workload, formatter: str) -> list[dict[str, Any]]:
    """Every record of kcoord's internal topic, read from the upstream itself, as the formatter prints it."""
    done = w.tools.tool(
        "kafka-console-consumer.sh",
        "--bootstrap-server",
        w.upstream.bootstrap,
        "--topic",
        w.internal_topic,
        "--partition",
        "0",
        "--offset",
        "earliest",
        "--timeout-ms",
        "3000",
        "--formatter",
        f"org.apache.kafka.tools.consumer.{formatter}",
        check=False,
    )
    # --timeout-ms ends the tool with "Processed a total of N messages" after a TimeoutException (4.0).
    assert "Processed a total of" in done.stderr, done.stderr
    # Kafka 4.0's ApiMessageFormatter prints one JSON object per record with no separator between them.
    records, decoder, text, at = [], json.JSONDecoder(), done.stdout.strip(), 0
    while at < len(text):
        record, at = decoder.raw_decode(text, at)
        records.append(record)
        while at < len(text) and text[at].isspace():
            at += 1
    return records


def test_kafka_formatters_read_kcoords_records(workload: Workload) -> None:
    w = workload
    offsets = console_consumer(w, "OffsetsMessageFormatter")
    latest: dict[tuple[str, str, int], dict[str, Any] | None] = {}
    for rec in offsets:
        assert rec["key"]["type"] == 1, rec
        k, v = rec["key"]["data"], rec["value"]
        latest[(k["group"], k["topic"], k["partition"])] = None if v is None else v["data"]
        assert v is None or v["version"] == 3, rec
    for group in (w.classic, w.kip848):
        for p in range(PARTITIONS):
            v = latest[(group, w.topic, p)]
            assert (
                v is not None
                and v["offset"] == PER_PARTITION
                and v["metadata"] == ""
                and v["commitTimestamp"] > 0
            )
    # the reset group's (whatever the reset tests left: reset, or deleted by tombstones) are what kcoord serves
    now = committed(w.kcoord.bootstrap, w.reset)
    for p in range(PARTITIONS):
        printed = latest[(w.reset, w.topic, p)]
        assert (printed and printed["offset"]) == now.get((w.topic, p)), (p, printed, now)

    groups = console_consumer(w, "GroupMetadataMessageFormatter")
    last: dict[str, dict[str, Any] | None] = {}
    for rec in groups:
        assert rec["key"]["type"] == 2, rec
        last[rec["key"]["data"]["group"]] = None if rec["value"] is None else rec["value"]["data"]
        if rec["value"] is not None:
            assert rec["value"]["version"] == 3, rec
    classic = last[w.classic]
    assert classic is not None
    assert classic["protocolType"] == "consumer" and classic["protocol"] == "range"
    members = {mb["memberId"]: mb for mb in classic["members"]}
    static, dynamic = w.members["static"], w.members["dynamic"]
    assert set(members) == {static.member_id, dynamic.member_id}
    assert members[static.member_id]["groupInstanceId"] == STATIC_ID
    assert members[dynamic.member_id]["groupInstanceId"] is None
    assert members[static.member_id]["clientId"] == "tools-static-client"
    assert members[static.member_id]["clientHost"] == "/127.0.0.1"
    assert classic["leader"] in members and classic["generation"] >= 2
    reset = last[w.reset]
    assert reset is not None and reset["members"] == [] and reset["protocolType"] == "consumer"
    # KIP-848 records have no formatter in Kafka 4.0 (each of these two prints only its own types)
    assert w.kip848 not in last


def test_kafka_decodes_kcoords_kip848_records(workload: Workload) -> None:
    """Kafka 4.0 has no console formatter for KIP-848 records (types 3-8), but ``kafka-dump-log.sh
    --offsets-decoder`` decodes every record type of a ``__consumer_offsets`` segment with Kafka's
    own coordinator serde: run on the segment of kcoord's internal topic on the Kafka upstream."""
    w = workload
    if not isinstance(w.upstream, KafkaBroker):
        pytest.skip("reads the upstream's log segment files; tansu keeps its log in memory")
    segment = w.upstream.data_dir / f"{w.internal_topic}-0" / "00000000000000000000.log"
    out = w.tools.tool("kafka-dump-log.sh", "--files", str(segment), "--offsets-decoder").stdout
    last: dict[tuple[str, str], dict[str, Any]] = {}  # (type, member id or "") → the last value printed
    for line in out.splitlines():
        if not line.startswith("| offset:") or f'"groupId":"{w.kip848}"' not in line:
            continue
        key_text, _, value_text = line.split(" key: ", 1)[1].partition(" payload: ")
        key, value = json.loads(key_text), json.loads(value_text)
        assert value["version"] == "0", line
        last[(key["type"], key["data"].get("memberId", ""))] = value["data"]
    member = w.members["kip848"]
    partitions = sorted(member.assigned)
    metadata = last[("5", member.member_id)]
    assert (metadata["clientId"], metadata["clientHost"]) == ("tools-kip848-client", "/127.0.0.1")
    assert metadata["subscribedTopicNames"] == [w.topic] and metadata["classicMemberMetadata"] is None
    epoch = last[("3", "")]["epoch"]
    assert epoch >= 1 and last[("6", "")]["assignmentEpoch"] == epoch
    (target,) = last[("7", member.member_id)]["topicPartitions"]
    assert target["partitions"] == partitions
    current = last[("8", member.member_id)]
    assert current["memberEpoch"] == epoch and current["state"] == 0  # STABLE
    assert [tp["partitions"] for tp in current["assignedPartitions"]] == [partitions]
    assert current["partitionsPendingRevocation"] == []
