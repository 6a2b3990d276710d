"""The classic state machine reports lifecycle events; the observer turns them into metrics and logs."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kcoord.coordinator.core import events as ev
from kcoord.coordinator.core.events import (
    GroupStateChanged,
    MemberExpired,
    MemberFenced,
    MemberJoined,
    MemberLeft,
    RebalanceCompleted,
    RebalanceStarted,
)
from kcoord.coordinator.core.result import Result
from kcoord.coordinator.ops.logs import JsonFormatter, KeyValueFormatter, log_event
from kcoord.coordinator.ops.metrics import Metrics
from kcoord.coordinator.ops.observability import ShardEventObserver
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode as E
from kcoord.protocol.messages import ApiKey
from tests.unit.classic_context import ClassicContext, assignment


class EventContext(ClassicContext):
    """ClassicContext that also keeps every event the shard reported, in order."""

    def apply(self, result: Result) -> None:
        if not hasattr(self, "events"):
            self.events: list[Any] = []
        self.events.extend(result.events)
        super().apply(result)

    def take(self, *types: type) -> list[Any]:
        got = [e for e in self.events if not types or isinstance(e, types)]
        self.events.clear()
        return got


def stable_group(
    c: EventContext, group: str = "g", instance_ids: tuple[str | None, ...] = (None, None)
) -> list[str]:
    """Members join (v9, MEMBER_ID_REQUIRED first for dynamic ones), the initial delay passes, the
    leader syncs: a Stable generation 1. Returns the member ids."""
    ctxs = []
    for i, instance in enumerate(instance_ids):
        first = c.join(group, instance_id=instance, client_id=f"c{i}")
        if instance is None:
            member_id = c.reply(first).member_id
            ctxs.append(c.join(group, member_id, client_id=f"c{i}"))
        else:
            ctxs.append(first)
    c.sleep(6_000)  # the initial delay, extended once because a second member arrived during it
    responses = [c.reply(ctx) for ctx in ctxs]
    members = [r.member_id for r in responses]
    leader = responses[0].leader
    for member_id in members:
        assigns = {mid: assignment([i]) for i, mid in enumerate(members)} if member_id == leader else {}
        c.sync(group, member_id, 1, assignments=assigns)
    return members


def test_a_first_rebalance_reports_joins_start_and_completion_with_its_duration() -> None:
    c = EventContext()
    members = stable_group(c)
    events = c.take()
    joined = [e for e in events if isinstance(e, MemberJoined)]
    assert [(e.group, e.member_id, e.instance_id, e.client_id, e.protocol_type) for e in joined] == [
        ("g", members[0], None, "c0", "consumer"),
        ("g", members[1], None, "c1", "consumer"),
    ]
    started = [e for e in events if isinstance(e, RebalanceStarted)]
    assert [(e.reason, e.generation) for e in started] == [("member_joined", 0)]
    completed = [e for e in events if isinstance(e, RebalanceCompleted)]
    assert completed == [RebalanceCompleted("g", 1, 6_000, 2, "range")]
    states = [(e.old, e.new) for e in events if isinstance(e, GroupStateChanged)]
    assert states == [("Empty", "PreparingRebalance"), ("PreparingRebalance", "CompletingRebalance"),
                      ("CompletingRebalance", "Stable")]  # fmt: skip


def test_fencing_is_reported_with_the_error_and_the_api() -> None:
    c = EventContext()
    members = stable_group(c)
    c.take()
    assert c.heartbeat("g", members[0], 7).error_code == E.ILLEGAL_GENERATION
    assert c.heartbeat("g", "nobody", 1).error_code == E.UNKNOWN_MEMBER_ID
    c.reply(c.sync("g", members[1], 5))
    c.commit("g", {("t", 0): 1}, member_id=members[0], generation_id=9)
    assert c.take(MemberFenced) == [
        MemberFenced("g", members[0], None, "ILLEGAL_GENERATION", "heartbeat"),
        MemberFenced("g", "nobody", None, "UNKNOWN_MEMBER_ID", "heartbeat"),
        MemberFenced("g", members[1], None, "ILLEGAL_GENERATION", "sync_group"),
        MemberFenced("g", members[0], None, "ILLEGAL_GENERATION", "offset_commit"),
    ]
    assert c.heartbeat("g", members[0], 1).error_code == E.NONE
    assert c.take(MemberFenced) == []


def test_static_member_replaced_fences_the_old_id() -> None:
    c = EventContext()
    old, _ = stable_group(c, instance_ids=("i-0", "i-1"))
    c.take()
    new_id = c.reply(c.join("g", instance_id="i-0", client_id="c0")).member_id
    assert c.take(MemberJoined) == [
        MemberJoined("g", new_id, "i-0", "c0", "/127.0.0.1", "consumer", rejoin=True)
    ]
    assert c.heartbeat("g", old, 1, instance_id="i-0").error_code == E.FENCED_INSTANCE_ID
    assert c.take(MemberFenced) == [MemberFenced("g", old, "i-0", "FENCED_INSTANCE_ID", "heartbeat")]


def test_leave_and_expiry_are_reported_and_start_rebalances_with_bounded_reasons() -> None:
    c = EventContext()
    a, b = stable_group(c)
    c.take()
    c.leave("g", [(a, None)], reason="shutting down")
    events = c.take()
    assert MemberLeft("g", a, None, "leave_group", "shutting down") in events
    assert [(e.reason, e.generation) for e in events if isinstance(e, RebalanceStarted)] == [
        ("member_left", 1)
    ]
    c.sleep(10_000)  # b's rejoin never comes: its session runs out
    events = c.take()
    assert MemberExpired("g", b, None, 10_000) in events
    completed = [e for e in events if isinstance(e, RebalanceCompleted)]
    assert [(e.generation, e.members) for e in completed] == [(2, 0)]


def test_every_reason_in_events_is_in_the_vocabulary() -> None:
    c = EventContext()
    a, b = stable_group(c)
    c.leave("g", [(a, None)])
    c.sleep(20_000)
    for e in c.take():
        if isinstance(e, RebalanceStarted):
            assert e.reason in ev.REBALANCE_REASONS
        if isinstance(e, MemberLeft):
            assert e.reason in ev.LEAVE_REASONS


# -- observer: events → metrics and log lines --------------------------------------------------------------
def samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    from prometheus_client import generate_latest

    out = {}
    for family in text_string_to_metric_families(generate_latest(metrics.registry).decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_observer_counts_events_and_logs_one_line_each(caplog: pytest.LogCaptureFixture) -> None:
    metrics = Metrics()
    observer = ShardEventObserver(metrics)
    with caplog.at_level(logging.INFO, logger="kcoord.events"):
        observer.group_events(
            3,
            [
                MemberJoined("g", "m-1", "i-1", "app", "/10.0.0.1"),
                MemberJoined("g", "m-2", None, "app", "/10.0.0.2"),
                RebalanceStarted("g", "member_joined", 0, 2, "adding new member m-2"),
                RebalanceStarted("g", "made-up reason", 0, 2),
                RebalanceCompleted("g", 1, 1500, 2, "range"),
                MemberLeft("g", "m-1", "i-1", "leave_group", "bye"),
                MemberExpired("g", "m-2", None, 45_000),
            ],
        )
        observer.shard_loaded(3, 120, 0.25, 400)
    got = samples(metrics)
    assert got[("kcoord_member_joins_total", (("kind", "static"),))] == 1
    assert got[("kcoord_member_joins_total", (("kind", "dynamic"),))] == 1
    classic = ("protocol", "classic")
    assert got[("kcoord_rebalances_total", (classic, ("reason", "member_joined")))] == 1
    assert (
        got[("kcoord_rebalances_total", (classic, ("reason", "other")))] == 1
    )  # unbounded text never becomes a label
    assert got[("kcoord_rebalance_duration_seconds_count", (classic,))] == 1
    assert got[("kcoord_rebalance_duration_seconds_sum", (classic,))] == 1.5
    assert got[("kcoord_member_removals_total", (("reason", "leave_group"),))] == 1
    assert got[("kcoord_member_removals_total", (("reason", "expired"),))] == 1
    assert got[("kcoord_shard_load_seconds_count", ())] == 1
    assert got[("kcoord_shard_loaded_records_total", ())] == 120  # live records replayed
    assert got[("kcoord_shard_load_read_records_total", ())] == 400  # records fetched before compaction
    events = [r.kcoord_event for r in caplog.records]  # type: ignore[attr-defined]
    assert events == ["member.joined", "member.joined", "rebalance.started", "rebalance.started",
                      "rebalance.completed", "member.left", "member.expired", "shard.loaded"]  # fmt: skip
    line = KeyValueFormatter().format(caplog.records[4])
    assert (
        "event=rebalance.completed shard=3 group=g generation=1 duration_ms=1500 members=2 protocol=range "
        "type=classic" in line
    )


def test_response_hooks_count_commit_results_and_fencing_by_reason() -> None:
    metrics = Metrics()
    R = m.OffsetCommitResponse
    commit = R(topics=[R.OffsetCommitResponseTopic(name="t", partitions=[
        R.OffsetCommitResponsePartition(partition_index=0, error_code=0),
        R.OffsetCommitResponsePartition(partition_index=1, error_code=0),
    ])])  # fmt: skip
    fenced_commit = R(topics=[R.OffsetCommitResponseTopic(name="t", partitions=[
        R.OffsetCommitResponsePartition(partition_index=0, error_code=E.ILLEGAL_GENERATION),
    ])])  # fmt: skip
    metrics.response_sent(ApiKey.OFFSET_COMMIT, 9, commit)
    metrics.response_sent(ApiKey.OFFSET_COMMIT, 9, fenced_commit)
    metrics.response_sent(ApiKey.HEARTBEAT, 4, m.HeartbeatResponse(error_code=E.FENCED_INSTANCE_ID))
    metrics.response_sent(ApiKey.HEARTBEAT, 4, m.HeartbeatResponse(error_code=E.REBALANCE_IN_PROGRESS))
    metrics.request_done(ApiKey.HEARTBEAT, 0.002)
    got = samples(metrics)
    assert got[("kcoord_offset_commits_total", (("api", "offset_commit"), ("result", "NONE")))] == 2
    assert (
        got[("kcoord_offset_commits_total", (("api", "offset_commit"), ("result", "ILLEGAL_GENERATION")))]
        == 1
    )
    assert (
        got[("kcoord_fenced_requests_total", (("api", "offset_commit"), ("reason", "ILLEGAL_GENERATION")))]
        == 1
    )
    assert (
        got[("kcoord_fenced_requests_total", (("api", "heartbeat"), ("reason", "FENCED_INSTANCE_ID")))] == 1
    )
    assert (
        "kcoord_fenced_requests_total",
        (("api", "heartbeat"), ("reason", "REBALANCE_IN_PROGRESS")),
    ) not in got
    assert got[("kcoord_responses_total", (("api", "heartbeat"), ("error", "REBALANCE_IN_PROGRESS"),
                                           ("version", "4")))] == 1  # fmt: skip
    assert got[("kcoord_request_latency_seconds_count", (("api", "heartbeat"),))] == 1


def test_group_gauges_are_read_from_the_shards_at_scrape_time() -> None:
    c = EventContext()
    stable_group(c, "g1", instance_ids=("i-0", None))
    c.join("g2", version=3)  # PreparingRebalance, one dynamic member

    class Runtime:
        loaded, fenced, state = True, False, c.shard

    class Loading:
        loaded, fenced, state = False, False, None

    metrics = Metrics()
    metrics.watch_shards(lambda: [Runtime(), Loading()], lambda: 3)
    got = samples(metrics)
    classic = (("protocol_type", "consumer"), ("type", "classic"))
    assert got[("kcoord_groups", (classic[0], ("state", "Stable"), classic[1]))] == 1
    assert got[("kcoord_groups", (classic[0], ("state", "PreparingRebalance"), classic[1]))] == 1
    members = {labels: n for (name, labels), n in got.items() if name == "kcoord_group_members"}
    assert members == {
        (("kind", "static"), ("protocol", "classic"), ("state", "Stable"), ("type", "classic")): 1,
        (("kind", "dynamic"), ("protocol", "classic"), ("state", "Stable"), ("type", "classic")): 1,
        (
            ("kind", "dynamic"),
            ("protocol", "classic"),
            ("state", "PreparingRebalance"),
            ("type", "classic"),
        ): 1,
    }
    assert got[("kcoord_shards", (("status", "loaded"),))] == 1
    assert got[("kcoord_shards", (("status", "loading"),))] == 2  # one loading, one not created yet


# -- log formats -------------------------------------------------------------------------------------------
def _record(logger: logging.Logger, *args: Any, **fields: Any) -> logging.LogRecord:
    captured: list[logging.LogRecord] = []

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            captured.append(record)

    handler = Catch()
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        if args:
            logger.info(*args)
        else:
            log_event(logger, "member.left", **fields)
    finally:
        logger.removeHandler(handler)
    return captured[0]


def test_key_value_lines_quote_only_what_needs_quoting() -> None:
    logger = logging.getLogger("test.kv")
    record = _record(logger, group="orders", member="c-1", detail='bye "now"', instance=None, ok=True)
    line = KeyValueFormatter().format(record)
    assert line.split(" ", 3)[1:3] == ["level=INFO", "logger=test.kv"]
    assert line.endswith('event=member.left group=orders member=c-1 detail="bye \\"now\\"" ok=true')
    assert "instance" not in line
    plain = KeyValueFormatter().format(_record(logger, "kcoord serving on %s", "127.0.0.1:9092"))
    assert plain.endswith('msg="kcoord serving on 127.0.0.1:9092"')
    edges = KeyValueFormatter().format(
        _record(logger, empty="", newline="a\nb", bare="x[1]@h:9/p,q+r_s-t.u", tail="ok\n", spaced=" x")
    )
    assert edges.endswith('empty="" newline="a\\nb" bare=x[1]@h:9/p,q+r_s-t.u tail="ok\\n" spaced=" x"')


def test_each_line_has_its_own_timestamp_across_seconds() -> None:
    """The formatted second is kept for the lines that share it, never for a line of another."""
    logger = logging.getLogger("test.ts")
    stamps = []
    for created in (1795990000.25, 1795990000.999, 1795990001.0, 1795989999.5):
        record = _record(logger, group="g")
        record.created, record.msecs = created, (created - int(created)) * 1000
        stamps.append(KeyValueFormatter().format(record).split(" ", 1)[0])
    assert stamps == [
        "ts=2026-11-29T22:06:40.250Z",
        "ts=2026-11-29T22:06:40.999Z",
        "ts=2026-11-29T22:06:41.000Z",
        "ts=2026-11-29T22:06:39.500Z",
    ]


def test_json_lines_parse_and_keep_types() -> None:
    logger = logging.getLogger("test.json")
    doc = json.loads(JsonFormatter().format(_record(logger, group="g", generation=3, duration_ms=12)))
    assert doc["event"] == "member.left" and doc["generation"] == 3 and doc["level"] == "INFO"
    assert doc["ts"].endswith("Z")


# -- /healthz and /readyz -------------------------------------------------------------------------------
def test_readyz_is_503_until_every_shard_is_loaded_and_names_the_missing_ones() -> None:
    from types import SimpleNamespace

    from kcoord.coordinator.ops.observability import MetricsServer

    shards = [
        SimpleNamespace(index=0, loaded=True, fenced=False, lost=None),
        SimpleNamespace(index=1, loaded=False, fenced=True, lost=None),
        SimpleNamespace(index=2, loaded=False, fenced=False, lost="topic deleted"),
    ]
    metrics = Metrics()
    metrics.shard_lost(2, False, "topic deleted")
    app = SimpleNamespace(settings=SimpleNamespace(shards=4), shards=shards, metrics=metrics)
    server = MetricsServer(app)  # type: ignore[arg-type]
    status, ctype, body = server.respond("GET", "/readyz")
    assert (status, ctype) == (503, "application/json")
    assert json.loads(body) == {
        "status": "unavailable", "listening": True, "shards": 4, "loaded": 1, "not_loaded": [1, 2, 3],
        "fenced": [1], "log_lost": {"2": "topic deleted"}, "log_lost_total": 1,
    }  # fmt: skip
    assert server.respond("GET", "/healthz")[0] == 200  # alive while shards load
    shards[1].loaded, shards[1].fenced = True, False
    shards[2].loaded, shards[2].lost = True, None
    shards.append(SimpleNamespace(index=3, loaded=True, fenced=False, lost=None))
    status, _, body = server.respond("GET", "/readyz?verbose=1")
    assert status == 200 and json.loads(body)["status"] == "ok"
    status, ctype, body = server.respond("GET", "/metrics")
    assert status == 200 and ctype.startswith("text/plain") and b"kcoord_connections" in body
    assert server.respond("POST", "/metrics")[0] == 405
    assert server.respond("GET", "/")[0] == 404


def test_readyz_follows_the_upstream_and_the_listeners_and_healthz_only_a_fatal_stop() -> None:
    from types import SimpleNamespace

    from kcoord.coordinator.ops.observability import MetricsServer
    from kcoord.coordinator.ops.upstream_health import UpstreamHealth

    now = [100.0]
    upstream = UpstreamHealth(5.0, now=lambda: now[0])
    shards = [SimpleNamespace(index=0, loaded=True, fenced=False, lost=None)]
    app = SimpleNamespace(
        settings=SimpleNamespace(shards=1),
        shards=shards,
        metrics=Metrics(),
        upstream_health=upstream,
        listening=False,
        fatal=None,
    )
    server = MetricsServer(app)  # type: ignore[arg-type]
    upstream.answered()
    assert server.respond("GET", "/readyz")[0] == 503  # not accepting connections yet
    app.listening = True
    status, _, body = server.respond("GET", "/readyz")
    assert status == 200
    assert json.loads(body)["upstream"] == {
        "state": "answering", "seconds_since_answer": 0.0, "timeout_seconds": 5.0, "last_error": None
    }  # fmt: skip
    now[0] += 5.5  # no answer for longer than readiness.upstream.timeout.ms
    status, _, body = server.respond("GET", "/readyz")
    assert status == 503 and json.loads(body)["upstream"]["state"] == "silent"
    assert server.respond("GET", "/healthz")[0] == 200
    upstream.answered()
    assert server.respond("GET", "/readyz")[0] == 200
    app.fatal = "the embedded broker was killed by SIGKILL"
    status, _, body = server.respond("GET", "/healthz")
    assert status == 503 and json.loads(body) == {"status": "stopping", "reason": app.fatal}
    assert server.respond("GET", "/readyz")[0] == 503
