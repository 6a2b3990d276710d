"""The analytics pipeline on real Spark (local[1]) over hand-made event records with known answers.

The scenario: a classic `range` group and a `cooperative-sticky` group, each growing from 1 to 4
(range) or 1 to 2 (cooperative) consumers on a 6-partition topic; five fenced commits; three bad
records. The expected figures follow from the assignments by hand (see each test).
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

pyspark = pytest.importorskip(
    "pyspark", reason="pyspark is a test extra (pyproject.toml); not installed here"
)

from kcoord.analytics import pipeline  # noqa: E402
from kcoord.analytics.run import parse_since  # noqa: E402

T0 = 1_700_000_000_000


def ev(type_: str, ts: int, **fields: Any) -> dict[str, Any]:
    return {"v": 1, "type": type_, "ts": ts, "shard": 0, **fields}


def rebalance(
    group: str,
    gen: int,
    ts: int,
    protocol: str,
    owners: dict[str, list[int]],
    reason: str,
    static: bool = False,
) -> list[dict[str, Any]]:
    return [
        ev("rebalance_started", ts, group=group, reason=reason, generation=gen - 1, members=len(owners)),
        ev(
            "rebalance_completed",
            ts + 100,
            group=group,
            generation=gen,
            duration_ms=100,
            members=len(owners),
            protocol=protocol,
        ),
        ev(
            "assignment",
            ts + 100,
            group=group,
            generation=gen,
            protocol_type="consumer",
            protocol=protocol,
            members=len(owners),
            assignment=[
                {
                    "member": f"{m}-id",
                    "instance": m if static else None,
                    "partitions": [f"t:{p}" for p in ps],
                    "bytes": 10,
                }
                for m, ps in owners.items()
            ],
        ),
    ]


def scenario() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    ts = T0
    for i, c in enumerate(["c1", "c2", "c3", "c4"]):
        out.append(
            ev(
                "member_joined",
                ts,
                group="g-range",
                member=f"{c}-id",
                kind="dynamic",
                client_id=c,
                host="/10.0.0.1",
                protocol_type="consumer",
                rejoin=False,
            )
        )
        owners = [
            {"c1": [0, 1, 2, 3, 4, 5]},
            {"c1": [0, 1, 2], "c2": [3, 4, 5]},
            {"c1": [0, 1], "c2": [2, 3], "c3": [4, 5]},
            {"c1": [0, 1], "c2": [2, 3], "c3": [4], "c4": [5]},
        ][i]
        out += rebalance("g-range", i + 1, ts + 10, "range", owners, "member_joined")
        ts += 1000
    for gen, owners in enumerate(
        [{"c1": [0, 1, 2, 3, 4, 5]}, {"c1": [0, 1, 2], "c2": []}, {"c1": [0, 1, 2], "c2": [3, 4, 5]}], start=1
    ):
        out += rebalance("g-coop", gen, ts, "cooperative-sticky", owners, "member_joined")
        ts += 1000
    out.append(
        ev(
            "commits",
            ts,
            group="g-range",
            count=40,
            requests=20,
            fenced={"ILLEGAL_GENERATION": 3},
            rejected={"REBALANCE_IN_PROGRESS": 1},
            mode="classic:generation",
        )
    )
    out.append(
        ev(
            "commits",
            ts + 1000,
            group="g-range",
            count=10,
            requests=5,
            fenced={"UNKNOWN_MEMBER_ID": 2},
            rejected={},
            mode="classic:generation",
        )
    )
    out.append(
        ev(
            "member_expired",
            ts,
            group="g-range",
            member="c4-id",
            kind="dynamic",
            client_id="c4",
            host="/10.0.0.1",
            timeout_ms=10000,
        )
    )
    out.append(
        ev(
            "member_fenced",
            ts + 5,
            group="g-range",
            member="c4-id",
            kind="dynamic",
            client_id="",  # the writer forgets an expired member's client: the join names it
            host="",
            error="UNKNOWN_MEMBER_ID",
            api="offset_commit",
            mode="classic:generation",
        )
    )
    return out


def raw_frame(spark: Any, values: list[bytes | None]) -> Any:
    rows = [(i % 3, i, T0 + i, b"k", v) for i, v in enumerate(values)]
    return spark.createDataFrame(rows, "partition int, offset long, timestamp long, key binary, value binary")


GARBAGE = b"\x00\x01garbage\xff\xfe"


def bad_records() -> list[tuple[bytes | None, str, str | None]]:
    """(value, problem, failing fields): records of the event topic that must be no event. Each is
    aimed at g-range, so one read as an event would change the figures the tests check by hand."""

    def js(e: dict[str, Any]) -> bytes:
        return json.dumps(e).encode()

    started = ev("rebalance_started", T0, group="g-range", reason="member_joined", generation=4, members=4)
    completed = ev("rebalance_completed", T0, group="g-range", generation=5, duration_ms=100, members=4)
    sums = ev("commits", T0, group="g-range", count=1, requests=1, fenced={}, rejected={}, mode="m")
    joined = ev("member_joined", T0, group="g-range", member="z", kind="dynamic", client_id="c9")
    assigned = ev("assignment", T0, group="g-range", generation=5, members=1, protocol_type="consumer")
    return [
        (None, "empty", None),
        (b"", "empty", None),
        (GARBAGE, "not_utf8", None),
        (b"not json{", "bad_json", None),
        (b"[1, 2]", "bad_json", None),
        (b"{'v': 1, 'type': 'commits'}", "bad_json", None),
        (js(ev("shard_loaded", T0, group="", records=1, records_read=1)).replace(b"}", b', "seconds": NaN}'),
         "bad_json", None),
        (js({"v": 99, "type": "member_joined", "ts": T0}), "unknown_version", None),
        (js({"v": 1, "type": "teleported", "ts": T0, "shard": 0}), "unknown_type", None),
        (js({**started, "v": "1"}), "wrong_type", None),
        (js({**started, "ts": "abc"}), "wrong_type", None),
        (js({**started, "ts": T0 + 0.5}), "wrong_type", None),
        (js({**sums, "fenced": {"ILLEGAL_GENERATION": "lots"}}), "wrong_type", None),
        (js({**completed, "generation": 1 << 40}), "wrong_type", None),
        (js({**joined, "rejoin": "yes"}), "wrong_type", None),
        (js({k: v for k, v in joined.items() if k != "member"}), "missing_field", "member"),
        (js({k: v for k, v in completed.items() if k != "ts"}), "missing_field", "ts"),
        (js({**sums, "fenced": None}), "missing_field", "fenced"),
        (js({**completed, "duration_ms": -5}), "out_of_range", "duration_ms"),
        (js({**completed, "ts": T0 // 1000}), "out_of_range", "ts"),  # epoch seconds
        (js({**sums, "count": -3, "fenced": {"ILLEGAL_GENERATION": -1}}), "out_of_range", "count,fenced"),
        (js({**joined, "kind": "zombie"}), "out_of_range", "kind"),
        (js({**assigned, "assignment": [{"member": "z", "partitions": ["t-no-partition"]}]}),
         "out_of_range", "assignment"),
        (js({**sums, "fenced": {"ILLEGAL_GENERATION": None}}), "out_of_range", "fenced"),
        (js({**sums, "rejected": {"A": 1, "B": -2}}), "out_of_range", "rejected"),
        (js({**assigned, "assignment": [None]}), "out_of_range", "assignment"),
        (js({**assigned, "assignment": [{"member": "z", "bytes": -1, "partitions": None}]}),
         "out_of_range", "assignment"),
        (js({**assigned, "assignment": [{"member": "z", "partitions": ["t:1", None]}]}),
         "out_of_range", "assignment"),
    ]  # fmt: skip


@pytest.fixture(scope="module")
def tables(spark: Any) -> dict[str, Any]:
    values: list[bytes | None] = [json.dumps(e).encode() for e in scenario()]
    values += [value for value, _, _ in bad_records()]
    built = pipeline.build(spark, raw_frame(spark, values), None)
    return {name: df.toPandas() for name, df in built.items()}


def test_rebalances_counted_per_group_with_cause(tables: dict[str, Any]) -> None:
    reb = tables["rebalances"]
    assert reb.groupby("group").size().to_dict() == {"g-range": 4, "g-coop": 3}
    assert set(reb["reason"]) == {"member_joined"}
    assert set(reb[reb["group"] == "g-coop"]["protocol_class"]) == {"cooperative"}
    assert set(reb[reb["group"] == "g-range"]["protocol_class"]) == {"eager"}


def test_partitions_moved_by_hand(tables: dict[str, Any]) -> None:
    reb = tables["rebalances"].sort_values(["group", "generation"])
    # range 1→2→3→4 members on 6 partitions: 3 (3,4,5 to c2), 3 (2 to c2; 4,5 to c3), 1 (5 to c4)
    assert list(reb[reb["group"] == "g-range"]["moved"]) == [0, 3, 3, 1]
    # cooperative: 3 revoked in the first round, then assigned from nobody in the second
    coop = reb[reb["group"] == "g-coop"]
    assert list(coop["moved"]) == [0, 3, 0]
    assert list(coop["assigned_from_nobody"]) == [6, 0, 3]
    assert list(reb[reb["group"] == "g-range"]["members_in"]) == [1, 1, 1, 1]


def test_stop_the_world_partition_seconds(tables: dict[str, Any]) -> None:
    reb = tables["rebalances"]
    stw = reb.groupby("group")["stw_partition_seconds"].sum().round(6).to_dict()
    # eager: max(before, after)=6 partitions × 0.1 s, four times; cooperative: (6 + 0 + 3) × 0.1 s
    assert stw == {"g-range": 2.4, "g-coop": 0.9}


def test_fenced_commits_by_error_and_mode(tables: dict[str, Any]) -> None:
    f = tables["fencing"]
    commits = f[(f["source"] == "commits") & (f["outcome"] == "fenced")]
    assert commits.groupby("error")["n"].sum().to_dict() == {"ILLEGAL_GENERATION": 3, "UNKNOWN_MEMBER_ID": 2}
    assert set(commits["mode"]) == {"classic:generation"}
    rejected = f[f["outcome"] == "rejected"]
    assert rejected["n"].sum() == 1
    c = tables["commits"]
    assert (c["fenced"].sum(), c["partitions"].sum()) == (5, 50)


def test_zombie_is_a_member_fenced_after_it_expired(tables: dict[str, Any]) -> None:
    z = tables["zombies"]
    assert list(z[z["zombie"]]["member"]) == ["c4-id"]
    assert list(z[z["zombie"]][["client_id", "host"]].itertuples(index=False, name=None)) == [
        ("c4", "/10.0.0.1")
    ]


def test_churn_per_client(tables: dict[str, Any]) -> None:
    c = tables["churn"].set_index("client_id")
    assert c.loc["c4", "joins"] == 1 and c.loc["c4", "expiries"] == 1
    assert c["joins"].sum() == 4


def test_bad_records_each_named_with_its_problem_and_fields(tables: dict[str, Any]) -> None:
    bad = tables["bad_events"].sort_values("offset")
    expected = [(problem, fields) for _, problem, fields in bad_records()]
    details = [None if pd.isna(d) else d for d in bad["detail"]]
    assert list(zip(bad["problem"], details, strict=True)) == expected
    assert len(tables["events"]) == len(scenario())
    samples = set(bad["sample"].dropna())
    assert "not json{" in samples
    assert "hex:" + GARBAGE.hex().upper() in samples  # not UTF-8: shown as hex, never as a broken string


def test_assignments_that_kcoord_writes_are_no_bad_records(spark: Any) -> None:
    """Any legal topic name, a member of another protocol (partitions null), a member with none, an
    empty group: events, not bad records."""
    assignment = [
        {"member": "a", "instance": None, "bytes": 40, "partitions": ["orders.v2_EU-1:11", "t:0"]},
        {"member": "b", "instance": "i-b", "bytes": 0, "partitions": []},
        {"member": "c", "instance": None, "bytes": 12, "partitions": None},
        {"member": "d", "instance": None, "bytes": None, "partitions": None},
    ]
    values: list[bytes | None] = [
        json.dumps(ev("assignment", T0, group="g", generation=1, members=4, assignment=assignment)).encode(),
        json.dumps(ev("assignment", T0, group="g", generation=2, members=0, assignment=[])).encode(),
    ]
    built = pipeline.build(spark, raw_frame(spark, values), None)
    assert built["bad_events"].count() == 0
    assert built["events"].count() == 2


@pytest.mark.parametrize(
    "gathered", [pipeline.BAD_ROWS_GATHERED, 2], ids=["bad-gathered", "bad-parsed-again"]
)
def test_the_events_table_written_in_the_parse_s_pass_gives_the_cached_parse_tables(
    spark: Any, tables: dict[str, Any], tmp_path: Path, gathered: int
) -> None:
    """kcoord analytics writes the events table in the parse's own pass (pipeline.write_events) and
    builds every other table from its files: every table, good and bad records alike, has the same
    rows as from the in-memory parse. The bad records are gathered on the way; when there are more
    than that takes (2 here), they are parsed again, with the same rows."""
    values: list[bytes | None] = [json.dumps(e).encode() for e in scenario()]
    values += [value for value, _, _ in bad_records()]
    path = str(tmp_path / "events")
    writes = []

    def write(good: Any) -> Any:
        writes.append(path)
        good.write.mode("overwrite").parquet(path)
        return spark.read.parquet(path)

    built = pipeline.build_from(spark, pipeline.write_events(raw_frame(spark, values), write, gathered), None)
    assert writes == [path] and list(Path(path).glob("*.parquet"))
    assert spark.conf.get(pipeline.CONSTRAINT_PROPAGATION, None) is None  # put back after the write
    assert set(built) == set(tables)
    for name, df in built.items():
        written, cached = df.toPandas(), tables[name]
        assert list(written.columns) == list(cached.columns), name
        as_text = [
            t.astype(str).sort_values(list(t.columns)).reset_index(drop=True) for t in (written, cached)
        ]
        assert as_text[0].equals(as_text[1]), name
    assert len(built["bad_events"].toPandas()) == len(bad_records()) > 2


def test_report_renders_plots_and_says_empty(spark: Any, tmp_path: Path) -> None:
    from kcoord.analytics.report import write_report

    values: list[bytes | None] = [json.dumps(e).encode() for e in scenario()]
    values += [value for value, _, _ in bad_records()]
    values.append(json.dumps(ev("reconciliation_completed", T0 + 50, group="k848", generation=3,
                                duration_ms=2500, members=2)).encode())  # fmt: skip
    # An offsets-topic record whose key is garbage: counted on the offsets side.
    offsets = raw_frame(spark, [GARBAGE]).withColumn("key", pyspark.sql.functions.col("value"))
    built = pipeline.build(spark, raw_frame(spark, values), offsets)
    rows = {}
    # The offsets side's other tables are not what this test checks: Spark writes each slowly.
    for name, df in built.items():
        if name in ("offset_commits", "generations", "generation_movement"):
            continue
        df.write.mode("overwrite").parquet(str(tmp_path / "full" / name))
        rows[name] = df.count()
    summary = {"rows": rows, "source": "test", "events_topic": "ev", "offsets_topic": "off"}
    report = write_report(spark, tmp_path / "full", summary)
    text = report.read_text()
    assert f"ev: {len(bad_records())} records were skipped." in text
    assert "off: 1 records were skipped." in text and "CodecError" in text
    assert len(summary["plots"]) >= 6
    for png in summary["plots"]:
        data = Path(png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000
    assert report.read_text().count("<img") == len(summary["plots"])
    # commit rate per group over time, fencing over time by mode (g-range's commits are fenced)
    assert {"commit_rate", "fenced_over_time"} <= {Path(png).stem for png in summary["plots"]}
    assert "reconciliation_durations" in {Path(png).stem for png in summary["plots"]}
    assert "KIP-848 reconciliation" in text
    # times in tables are readable UTC date-times, never raw epoch ms
    assert re.findall(r"<td>\d{13}</td>", text) == []
    assert "2023-11-14 22:13:2" in text  # T0 + a few seconds: the rebalances' completed_ts

    empty = pipeline.build(spark, raw_frame(spark, []), None)
    rows = {}
    for name, df in empty.items():
        df.write.mode("overwrite").parquet(str(tmp_path / "empty" / name))
        rows[name] = df.count()
    summary = {"rows": rows, "source": "test"}
    text = write_report(spark, tmp_path / "empty", summary).read_text()
    assert "No events" in text and summary["plots"] == []


def test_since_accepts_ages_iso_and_epoch() -> None:
    assert parse_since("2h", now_ms=10_000_000) == 10_000_000 - 7_200_000
    assert parse_since("1700000000000") == 1_700_000_000_000
    assert parse_since("2023-11-14T22:13:20") == 1_700_000_000_000
    assert parse_since(None) is None


def consumer_assignment(partitions: list[int]) -> bytes:
    from kcoord.protocol import messages as m

    TP = m.ConsumerProtocolAssignment.TopicPartition
    body = m.ConsumerProtocolAssignment(
        assigned_partitions=[TP(topic="t", partitions=partitions)], user_data=None
    )
    return (1).to_bytes(2, "big") + body.encode(1)


def test_generation_partitions_are_distinct_after_static_rejoins(spark: Any) -> None:
    """A static member's rejoin writes its generation's record again under a new member id (no
    rebalance): 6 partitions, 2 members, however often."""
    from kcoord.protocol import records as r

    def generation_record(member_ids: tuple[str, str]) -> tuple[bytes, bytes | None]:
        members = [
            r.MemberMetadata(member_id=member_id, group_instance_id=f"i{n}", client_id="c", client_host="/h",
                             rebalance_timeout=60_000, session_timeout=10_000, subscription=b"",
                             assignment=consumer_assignment([3 * n, 3 * n + 1, 3 * n + 2]))
            for n, member_id in enumerate(member_ids)
        ]  # fmt: skip
        value = r.GroupMetadataValue(protocol_type="consumer", generation=1, protocol="range", leader=member_ids[0],
                                     current_state_timestamp=T0, members=members)  # fmt: skip
        return r.encode_record(r.Record(r.GroupMetadataKey(group="gs"), value))

    records = [generation_record(("a", "b")), generation_record(("a", "b2")), generation_record(("a", "b3"))]
    frame = spark.createDataFrame(
        [(0, i, T0 + i, key, value) for i, (key, value) in enumerate(records)],
        "partition int, offset long, timestamp long, key binary, value binary",
    )
    gens = pipeline.build(spark, None, frame)["generations"].toPandas()
    assert gens[["group", "generation", "members", "partitions"]].values.tolist() == [["gs", 1, 2, 6]]


def test_a_generation_without_assignment_is_classed_by_its_group_and_protocol(spark: Any) -> None:
    """The last generation of a classic group that emptied has no assignment event: it is still
    eager (range), and the report's per-group table says so."""
    from kcoord.analytics.report import per_group_rebalances

    joined = ev("member_joined", T0, group="g-empty", member="a-id", kind="dynamic", client_id="a",
                protocol_type="consumer", rejoin=False)  # fmt: skip
    emptied = ev("rebalance_completed", T0 + 5000, group="g-empty", generation=2, duration_ms=10, members=0,
                 protocol="range")  # fmt: skip
    events = [joined, *rebalance("g-empty", 1, T0 + 10, "range", {"a": [0, 1]}, "member_joined"), emptied]
    built = pipeline.build(spark, raw_frame(spark, [json.dumps(e).encode() for e in events]), None)
    reb = built["rebalances"].toPandas().sort_values("generation")
    assert list(reb["protocol_class"]) == ["eager", "eager"]
    assert per_group_rebalances(reb)["protocol_class"].tolist() == ["eager"]


def test_per_group_table_takes_the_last_known_protocol_class() -> None:
    from kcoord.analytics.report import per_group_rebalances

    reb = pd.DataFrame(
        {
            "group": ["g", "g", "g"],
            "generation": [1, 2, 3],
            "completed_ts": [3, 1, 2],
            "moved": [0, 1, 2],
            "stw_partition_seconds": [0.0, 0.5, 0.25],
            "duration_ms": [10, 20, 30],
            "protocol": ["range", "range", None],
            "protocol_class": ["unknown", "cooperative", "eager"],
        }
    )
    row = per_group_rebalances(reb).iloc[0]
    # in completion order: cooperative (ts 1), eager (ts 2), unknown (ts 3) → eager
    assert (row["rebalances"], row["moved"], row["protocol_class"]) == (3, 3, "eager")


def lifetime_scenario() -> list[dict[str, Any]]:
    """Group "g-again" on a 6-partition topic, deleted and created again under the same name.
    Its first lifetime: a (gen 1: all 6), b joins (gen 2: 3 + 3, 3 moved), a leaves (gen 3: b owns
    all 6, 3 moved), b leaves (gen 4: empty, its 6 revoked), the group is deleted. Its second
    lifetime starts again at generation 1: c (all 6, nothing moved: nobody owned them), d joins
    (gen 2: c keeps 0-1, d takes 2-5: 4 moved)."""
    out: list[dict[str, Any]] = []
    gens = [{"a": [0, 1, 2, 3, 4, 5]}, {"a": [0, 1, 2], "b": [3, 4, 5]}, {"b": [0, 1, 2, 3, 4, 5]}, {}]
    for gen, owners in enumerate(gens, start=1):
        out += rebalance("g-again", gen, T0 + gen * 1000, "range", owners, "member_joined")
    out.append(ev("group_deleted", T0 + 9000, group="g-again", reason="delete_groups"))
    for gen, owners in enumerate([{"c": [0, 1, 2, 3, 4, 5]}, {"c": [0, 1], "d": [2, 3, 4, 5]}], start=1):
        out += rebalance("g-again", gen, T0 + 10_000 + gen * 1000, "range", owners, "member_joined")
    return out


def test_a_recreated_group_never_merges_with_its_predecessor(spark: Any) -> None:
    values = [json.dumps(e).encode() for e in lifetime_scenario()]
    built = pipeline.build(spark, raw_frame(spark, values), None)
    reb = built["rebalances"].toPandas().sort_values(["lifetime", "generation"])
    assert reb[["lifetime", "generation", "moved"]].values.tolist() == [
        [0, 1, 0], [0, 2, 3], [0, 3, 3], [0, 4, 6], [1, 1, 0], [1, 2, 4]
    ]  # fmt: skip
    assert reb["moved"].sum() == 16
    moves = built["movement"].toPandas().set_index(["lifetime", "generation"])
    assert (moves.loc[(1, 1), "partitions_before"], moves.loc[(1, 1), "assigned_from_nobody"]) == (0, 6)
    assert moves.loc[(0, 4), "partitions_after"] == 0


def test_a_recreated_group_in_the_offsets_topic_starts_a_new_lifetime(spark: Any) -> None:
    """Kafka's topic: a tombstone of the group's record deletes it; the re-created group's
    generation 1 is not its predecessor's. An online migration's tombstone is no new lifetime: the
    consumer group goes on at the classic generation, and the classic group at the group epoch."""
    from kcoord.protocol import records as r

    def classic(group: str, gen: int, owners: dict[str, list[int]]) -> tuple[bytes, bytes | None]:
        members = [
            r.MemberMetadata(member_id=m, group_instance_id=None, client_id="c", client_host="/h",
                             rebalance_timeout=60_000, session_timeout=10_000, subscription=b"",
                             assignment=consumer_assignment(ps))
            for m, ps in owners.items()
        ]  # fmt: skip
        value = r.GroupMetadataValue(protocol_type="consumer", generation=gen, protocol="range",
                                     leader=next(iter(owners), None), current_state_timestamp=T0 + gen,
                                     members=members)  # fmt: skip
        return r.encode_record(r.Record(r.GroupMetadataKey(group=group), value))

    def tombstone(group: str) -> tuple[bytes, bytes | None]:
        return r.encode_record(r.Record(r.GroupMetadataKey(group=group), None))

    topic_id = uuid.UUID("e3b0d9c8-c8f0-4b6a-9cfd-0e5ec0cf1122")

    def kip848_epoch(
        group: str, epoch: int, owners: dict[str, list[int]]
    ) -> list[tuple[bytes, bytes | None]]:
        """The topic's name, each member's target assignment, then the assignment epoch."""
        TM = r.ConsumerGroupPartitionMetadataValue.TopicMetadata
        TP = r.ConsumerGroupTargetAssignmentMemberValue.TopicPartition
        names = r.ConsumerGroupPartitionMetadataValue(
            topics=[TM(topic_id=topic_id, topic_name="t", num_partitions=6, partition_metadata=[])]
        )
        return [
            r.encode_record(r.Record(r.ConsumerGroupPartitionMetadataKey(group_id=group), names)),
            *(r.encode_record(r.Record(r.ConsumerGroupTargetAssignmentMemberKey(group_id=group, member_id=m),
                                       r.ConsumerGroupTargetAssignmentMemberValue(
                                           topic_partitions=[TP(topic_id=topic_id, partitions=ps)])))
              for m, ps in owners.items()),
            r.encode_record(r.Record(r.ConsumerGroupTargetAssignmentMetadataKey(group_id=group),
                                     r.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch))),
        ]  # fmt: skip

    records = [
        classic("ga", 1, {"a": [0, 1, 2, 3, 4, 5]}), classic("ga", 2, {"a": [0, 1, 2], "b": [3, 4, 5]}),
        classic("ga", 3, {}), tombstone("ga"),
        classic("ga", 1, {"c": [0, 1, 2, 3, 4, 5]}), classic("ga", 2, {"c": [0, 1], "d": [2, 3, 4, 5]}),
        # an upgrade (the classic group's tombstone, the consumer group at the classic generation, then
        # a joining member's epoch), and a downgrade (the consumer group's tombstone, the classic group
        # at the group epoch, then its rebalance)
        classic("gm", 1, {"a": [0, 1]}), classic("gm", 2, {"a": [0, 1]}), tombstone("gm"),
        *kip848_epoch("gm", 2, {"a": [0, 1]}), *kip848_epoch("gm", 3, {"b": [0, 1]}),
        r.encode_record(r.Record(r.ConsumerGroupMetadataKey(group_id="gm"), None)),
        classic("gm", 3, {"b": [0, 1]}), classic("gm", 4, {"b": [0, 1]}),
    ]  # fmt: skip
    # one Spark partition, as a topic partition is read: the decoder replays it in offset order
    frame = spark.createDataFrame(
        [(0, i, T0 + i, key, value) for i, (key, value) in enumerate(records)],
        "partition int, offset long, timestamp long, key binary, value binary",
    ).coalesce(1)
    built = pipeline.build(spark, None, frame)
    moves = built["generation_movement"].toPandas().sort_values(["group", "lifetime", "generation"])
    # (an empty generation, ga's 3, has no owners to compare: it is in generations, not here)
    assert moves[["group", "lifetime", "generation", "moved"]].values.tolist() == [
        ["ga", 0, 1, 0], ["ga", 0, 2, 3], ["ga", 1, 1, 0], ["ga", 1, 2, 4],
        ["gm", 0, 1, 0], ["gm", 0, 2, 0], ["gm", 0, 3, 2], ["gm", 0, 4, 0],
    ]  # fmt: skip
    gens = built["generations"].toPandas()
    assert sorted(zip(gens["group"], gens["lifetime"], gens["generation"], strict=True)) == [
        ("ga", 0, 1), ("ga", 0, 2), ("ga", 0, 3), ("ga", 1, 1), ("ga", 1, 2),
        ("gm", 0, 1), ("gm", 0, 2), ("gm", 0, 3), ("gm", 0, 4),
    ]  # fmt: skip


def test_readable_times_and_wrapped_titles() -> None:
    from kcoord.analytics.report import TITLE_WIDTH, Report, readable_time, with_readable_times

    assert readable_time(T0 + 7) == "2023-11-14 22:13:20.007 UTC"
    assert readable_time(None) == ""
    shown = with_readable_times(pd.DataFrame({"group": ["g"], "ts": [T0], "completed_ts": [T0], "n": [T0]}))
    assert shown.iloc[0].tolist() == ["g", readable_time(T0), readable_time(T0), T0]
    fig, ax = Report.figure(None, "x", "word " * 40)  # type: ignore[arg-type]
    lines = ax.get_title().split("\n")
    assert len(lines) > 1 and max(len(line) for line in lines) <= TITLE_WIDTH


def test_a_time_axis_of_one_moment_spans_a_minute_either_side_and_counts_have_separators() -> None:
    """A group that committed within one second is one point: its axis spans two minutes, not the
    years matplotlib would give it; a longer history keeps matplotlib's own limits."""
    import matplotlib.dates

    from kcoord.analytics.report import Report, count_axis, time_axis

    fig, ax = Report.figure(None, "x", "one moment")  # type: ignore[arg-type]
    ax.plot(pd.to_datetime([T0, T0], unit="ms"), [600, 600], marker="o")
    time_axis(ax, pd.Series([T0, T0, None]))
    lo, hi = (matplotlib.dates.num2date(x).timestamp() for x in ax.get_xlim())
    assert (lo, hi) == pytest.approx((T0 / 1000 - 60, T0 / 1000 + 60))
    fig, ax = Report.figure(None, "x", "a day")  # type: ignore[arg-type]
    ax.plot(pd.to_datetime([T0, T0 + 86_400_000], unit="ms"), [1_400_000, 2])
    time_axis(ax, pd.Series([T0, T0 + 86_400_000]))
    lo, hi = (matplotlib.dates.num2date(x).timestamp() for x in ax.get_xlim())
    assert lo <= T0 / 1000 and hi >= T0 / 1000 + 86_400 and hi - lo < 2 * 86_400
    count_axis(ax.yaxis)
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert "1,400,000" in labels or any("," in t for t in labels), labels
    assert 2 <= len(labels) <= 6 and ax.yaxis.get_offset_text().get_text() == "", labels


def test_kip848_reconciliations_are_a_table_per_group_lifetime(spark: Any) -> None:
    """kcoord's reconciliation_completed events: epoch, duration and members per group lifetime;
    a negative duration is a bad record, never a figure."""
    events = [
        ev("reconciliation_completed", T0 + 1000, group="k", generation=2, duration_ms=1500, members=3),
        ev("reconciliation_completed", T0 + 5000, group="k", generation=4, duration_ms=700, members=4),
        ev("group_deleted", T0 + 6000, group="k", reason="delete_groups"),
        ev("reconciliation_completed", T0 + 9000, group="k", generation=1, duration_ms=0, members=1),
        ev("reconciliation_completed", T0 + 9500, group="k", generation=2, duration_ms=-5, members=1),
    ]
    built = pipeline.build(spark, raw_frame(spark, [json.dumps(e).encode() for e in events]), None)
    rec = built["reconciliations"].toPandas().sort_values("completed_ts")
    assert rec[["lifetime", "epoch", "duration_ms", "members"]].values.tolist() == [
        [0, 2, 1500, 3], [0, 4, 700, 4], [1, 1, 0, 1]
    ]  # fmt: skip
    bad = built["bad_events"].toPandas()
    assert bad["problem"].tolist() == ["out_of_range"]
