"""The stock Java consumer 4.3 with ``group.protocol=consumer`` (KIP-848) against kcoord: topic
pattern subscriptions, a member killed and replaced (session timeout, no record lost), static
members restarted without disturbing the others, and the AdminClient's view of such a group
(describe, list-groups, list-offsets, delete-groups). kcoord stores its state on the upstream, tansu and
Apache Kafka in turn.

kcoord runs with a 6 s consumer session timeout and a 1 s heartbeat interval so a dead member is
noticed quickly.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from support.java import JavaPeer, run_admin
from support.kcoord_process import KcoordProcess
from support.workload import create_topic, produce_numbered, unique
from tests.support.fixtures import Upstream
from tests.support.wire import WireClient

pytestmark = pytest.mark.integration

SESSION_MS = 6000


@pytest.fixture(scope="module")
def kcoord(upstream: Upstream) -> Iterator[KcoordProcess]:
    with KcoordProcess("--shards", "3", "--storage", "kafka", "--internal-topic", unique("__kcoord_j848"),
                       "--group-consumer-session-timeout-ms", str(SESSION_MS),
                       "--group-consumer-heartbeat-interval-ms", "1000",
                       bootstrap=upstream.bootstrap) as proc:  # fmt: skip
        yield proc


def consumer_args(kcoord: KcoordProcess, group: str, *extra: str) -> list[str]:
    return ["--bootstrap", kcoord.bootstrap, "--group", group, "--group-protocol", "consumer",
            "--max-seconds", "120", *extra]  # fmt: skip


def owned(peer: JavaPeer) -> set[str]:
    latest = peer.latest("assigned")
    return set(latest["current"]) if latest else set()


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> float:
    """Seconds it took."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.1)
    return time.monotonic() - start


def partitions(topic: str, count: int) -> set[str]:
    return {f"{topic}-{p}" for p in range(count)}


def split_evenly(peers: list[JavaPeer], every: set[str]) -> Callable[[], bool]:
    def check() -> bool:
        sets = [owned(p) for p in peers]
        flat = [tp for s in sets for tp in s]
        return sorted(flat) == sorted(every) and max(map(len, sets)) - min(map(len, sets)) <= 1

    return check


def committed_offsets(kcoord: KcoordProcess, group: str) -> dict[str, int]:
    fetched = run_admin(kcoord.bootstrap, "list-offsets", group)["offsets"]
    return {tp: o["offset"] for tp, o in fetched.items() if o is not None}


def describe_members(kcoord: KcoordProcess, group: str) -> dict[str, Any]:
    """ConsumerGroupDescribe v1 over the wire: instance id -> member."""
    from kcoord.protocol import messages as m

    with WireClient(kcoord.bootstrap) as client:
        described = client.request(69, 1, m.ConsumerGroupDescribeRequest(group_ids=[group])).groups[0]
    assert described.error_code == 0, described
    return {mbr.instance_id: mbr for mbr in described.members}


# --subscription-pattern needs kcoord's Metadata fix-up: the Java consumer resolves the assigned
# topic ids with Metadata v12 topics=[{topicId=<id>, name=''}], which tansu refuses
# (relay/requests.py, metadata_asked_by_id).
@pytest.mark.parametrize("option", ["--pattern", "--subscription-pattern"])
def test_pattern_subscription_gets_exactly_the_matching_topics(
    kcoord: KcoordProcess, java_peer, option: str
) -> None:  # type: ignore[no-untyped-def]
    """--pattern: subscribe(java.util.regex.Pattern) (the client matches its metadata and sends
    topic names); --subscription-pattern: subscribe(SubscriptionPattern) (the coordinator
    resolves the RE2 regex)."""
    prefix = unique("j848-pat")
    layout = {f"{prefix}-a": 2, f"{prefix}-b": 3, f"other-{prefix}": 2, f"{prefix}x": 1}
    for topic, count in layout.items():
        create_topic(kcoord.bootstrap, topic, count)
        produce_numbered(kcoord.bootstrap, topic, 10 * count, count)
    matching = partitions(f"{prefix}-a", 2) | partitions(f"{prefix}-b", 3)
    peer = java_peer("ConsumerPeer", consumer_args(kcoord, unique("j848-pat-group"), option, f"{prefix}-.*", "--commit"),
                     name="j848-pattern")  # fmt: skip
    wait_until(lambda: owned(peer) == matching, 30, f"assignment {owned(peer)} == {sorted(matching)}")
    wait_until(lambda: (peer.latest("records") or {}).get("total", 0) >= 50, 10, "the 50 matching records")
    time.sleep(1)
    consumed = {tp for e in peer.events if e["event"] == "records" for tp in e["offsets"]}
    assert consumed == matching
    assert peer.latest("records")["total"] == 50  # type: ignore[index]
    assert owned(peer) == matching


def test_killed_member_is_replaced_and_no_record_is_lost(kcoord: KcoordProcess, java_peer) -> None:  # type: ignore[no-untyped-def]
    topic, group = unique("j848-kill"), unique("j848-kill-group")
    every = partitions(topic, 4)
    create_topic(kcoord.bootstrap, topic, 4)
    args = consumer_args(kcoord, group, "--topic", topic, "--commit", "--max-poll-records", "20")
    survivor = java_peer("ConsumerPeer", args, name="j848-survivor")
    victim = java_peer("ConsumerPeer", args, name="j848-victim")
    wait_until(split_evenly([survivor, victim], every), 30, "two members split four partitions")
    # 2000 records, 20 a poll, a commit after each poll: the victim dies part-way through its share
    produce_numbered(kcoord.bootstrap, topic, 2000, 4)
    wait_until(lambda: victim.latest("committed") is not None, 20, "the victim consumes and commits")

    victim.process.kill()  # SIGKILL: no leave heartbeat; only the session timeout removes it
    victim.stop()
    killed_at = time.monotonic()
    produce_numbered(kcoord.bootstrap, topic, 200, 4)
    took = wait_until(lambda: owned(survivor) == every, 30, "the survivor takes every partition")
    assert took >= (SESSION_MS / 1000) - 1.5, f"reassigned after {took:.1f}s, before the session timeout"
    assert time.monotonic() - killed_at >= (SESSION_MS / 1000) - 1.5

    restarted = java_peer("ConsumerPeer", args, name="j848-restarted")
    wait_until(split_evenly([survivor, restarted], every), 30, "the restarted member gets half back")
    assert len(owned(restarted)) == 2
    produce_numbered(kcoord.bootstrap, topic, 200, 4)
    wait_until(lambda: sum(committed_offsets(kcoord, group).values()) == 2400, 30, "every record committed")

    final = committed_offsets(kcoord, group)
    assert set(final) == every and all(offset == 600 for offset in final.values()), final
    victim_count = (victim.latest("records") or {}).get("total", 0)
    delivered = sum(
        e["count"] for p in (survivor, victim, restarted) for e in p.events if e["event"] == "records"
    )
    print(
        f"reassigned {took:.1f}s after the kill; delivered {delivered} records for 2400 (the victim {victim_count}); committed {final}"
    )
    assert delivered >= 2400  # at least once (records the victim got but did not commit come again)
    # no gap: every partition was read up to its last record by someone
    last = {}
    for p in (survivor, victim, restarted):
        for e in p.events:
            if e["event"] == "records":
                for tp, off in e["offsets"].items():
                    last[tp] = max(last.get(tp, -1), off)
    assert last == {tp: 599 for tp in every}


def ownership_intervals(
    peer: JavaPeer, ended_ms: float | None = None
) -> dict[str, list[tuple[float, float]]]:
    """partition -> [(from, to)] in the peer's wall-clock ms ("ts" of its callbacks): from an
    "assigned" (the consumer protocol's callbacks are incremental) to the "revoked" or "lost" that
    took it away, or to ``ended_ms`` (the kill) / now."""
    held: dict[str, float] = {}
    out: dict[str, list[tuple[float, float]]] = {}
    for e in peer.events:
        if e["event"] == "assigned":
            for tp in e["partitions"]:
                held.setdefault(tp, e["ts"])
        elif e["event"] in ("revoked", "lost"):
            for tp in e["partitions"]:
                if tp in held:
                    out.setdefault(tp, []).append((held.pop(tp), e["ts"]))
    end = ended_ms if ended_ms is not None else time.time() * 1000
    for tp, since in held.items():
        out.setdefault(tp, []).append((since, end))
    return out


def assert_never_owned_twice(owners: dict[str, dict[str, list[tuple[float, float]]]]) -> None:
    by_partition: dict[str, list[tuple[float, float, str]]] = {}
    for name, intervals in owners.items():
        for tp, spans in intervals.items():
            by_partition.setdefault(tp, []).extend((a, b, name) for a, b in spans)
    for tp, spans in by_partition.items():
        spans.sort()
        until, holder = float("-inf"), ""
        for start, end, who in spans:
            assert until <= start, f"{tp} owned by {holder} until {until} and by {who} from {start}: {spans}"
            if end > until:
                until, holder = end, who


def test_three_members_split_six_partitions_and_survive_a_kill(kcoord: KcoordProcess, java_peer) -> None:  # type: ignore[no-untyped-def]
    """Three Java consumers of the consumer protocol subscribe by name, commit with
    commitSync after every poll, one is SIGKILLed and later restarted. No partition is ever owned by
    two of them at once (from their rebalance callbacks), every record is read, and the committed
    offsets end exactly at what was produced."""
    topic, group = unique("j848-three"), unique("j848-three-group")
    every = partitions(topic, 6)
    create_topic(kcoord.bootstrap, topic, 6)
    # 20 records a poll, a commit after each, 30 ms of "work": the victim dies part-way through its share
    args = consumer_args(
        kcoord, group, "--topic", topic, "--commit", "--max-poll-records", "20", "--work-ms", "30"
    )
    a, b, victim = (java_peer("ConsumerPeer", args, name=f"j848-three-{n}") for n in ("a", "b", "victim"))

    def two_each(peers: list[JavaPeer]) -> Callable[[], bool]:
        return lambda: split_evenly(peers, every)() and all(len(owned(p)) == 2 for p in peers)

    wait_until(two_each([a, b, victim]), 40, "three members own two partitions each")
    produce_numbered(kcoord.bootstrap, topic, 3000, 6)
    wait_until(lambda: victim.latest("committed") is not None, 30, "the victim consumes and commits")

    victim.process.kill()  # SIGKILL: no leave heartbeat; only the session timeout removes it
    killed_ms = time.time() * 1000
    victim.stop()
    victim_read = (victim.latest("records") or {}).get("total", 0)
    assert victim_read < 1000, f"the victim read {victim_read} records: all of its share before the kill"
    produce_numbered(kcoord.bootstrap, topic, 300, 6)
    took = wait_until(lambda: owned(a) | owned(b) == every, 30, "the survivors take the victim's partitions")
    assert took >= (SESSION_MS / 1000) - 1.5, f"reassigned after {took:.1f}s, before the session timeout"
    assert len(owned(a)) == len(owned(b)) == 3

    restarted = java_peer("ConsumerPeer", args, name="j848-three-restarted")
    wait_until(two_each([a, b, restarted]), 40, "the restarted member gets two partitions back")
    produce_numbered(kcoord.bootstrap, topic, 300, 6)
    wait_until(lambda: sum(committed_offsets(kcoord, group).values()) == 3600, 40, "every record committed")

    final = committed_offsets(kcoord, group)
    assert final == {tp: 600 for tp in every}, final
    peers = {"a": a, "b": b, "victim": victim, "restarted": restarted}
    last: dict[str, int] = {}
    for p in peers.values():
        for e in p.events:
            if e["event"] == "records":
                for tp, off in e["offsets"].items():
                    last[tp] = max(last.get(tp, -1), off)
    assert last == {tp: 599 for tp in every}, last  # every partition read to its last record
    delivered = sum(e["count"] for p in peers.values() for e in p.events if e["event"] == "records")
    assert delivered >= 3600  # at least once: what the victim read but had not committed comes again
    assert not [
        e for p in (a, b, restarted) for e in p.events if e["event"] in ("commit_failed", "error", "fenced")
    ]
    owners = {
        name: ownership_intervals(p, killed_ms if name == "victim" else None) for name, p in peers.items()
    }
    assert_never_owned_twice(owners)
    print(
        f"victim's partitions reassigned {took:.1f}s after the kill (it had read {victim_read}); "
        f"delivered {delivered} records for 3600; "
        f"ownership changes: { {n: sum(len(v) for v in o.values()) for n, o in owners.items()} }"
    )


def test_static_member_restarted_within_the_session_keeps_its_partitions(
    kcoord: KcoordProcess, java_peer
) -> None:  # type: ignore[no-untyped-def]
    topic, group = unique("j848-static"), unique("j848-static-group")
    every = partitions(topic, 4)
    create_topic(kcoord.bootstrap, topic, 4)

    def start(iid: str, name: str) -> JavaPeer:
        return java_peer(
            "ConsumerPeer", consumer_args(kcoord, group, "--topic", topic, "--instance-id", iid), name=name
        )

    s1, s2 = start("s1", "j848-s1"), start("s2", "j848-s2")
    wait_until(split_evenly([s1, s2], every), 30, "two static members split four partitions")
    time.sleep(1.5)  # let epochs settle (a member acknowledging its assignment)
    before = describe_members(kcoord, group)
    assert set(before) == {"s1", "s2"}
    s1_epoch, s2_partitions = before["s1"].member_epoch, owned(s2)

    s1_seen = len(s1.events)
    assert s2.stop() == 0  # a static member's close: leave heartbeat with epoch -2, assignment kept
    stopped_at = time.monotonic()
    restarted = start("s2", "j848-s2b")
    wait_until(
        lambda: bool(owned(restarted)), SESSION_MS / 1000 + 20, "the restarted static member is assigned"
    )
    rejoined_after = time.monotonic() - stopped_at
    assert owned(restarted) == s2_partitions
    time.sleep(2)  # a (wrong) rebalance would show up on s1 now
    after = describe_members(kcoord, group)
    assert set(after) == {"s1", "s2"}
    assert after["s2"].member_id != before["s2"].member_id  # a new process took the instance id over
    print(
        f"s2 rejoined {rejoined_after:.1f}s after stopping; s1 epoch {s1_epoch} -> {after['s1'].member_epoch}; "
        f"s2 epoch {before['s2'].member_epoch} -> {after['s2'].member_epoch}; s2 kept {sorted(s2_partitions)}"
    )
    assert after["s1"].member_epoch == s1_epoch, (
        f"s1's epoch moved {s1_epoch} -> {after['s1'].member_epoch} (s2 rejoined after {rejoined_after:.1f}s)"
    )
    assert owned(s1) == every - s2_partitions
    assert not [e for e in s1.events[s1_seen:] if e["event"] in ("assigned", "revoked", "lost")], (
        "s1 was rebalanced"
    )


def test_admin_client_view_of_a_consumer_protocol_group(kcoord: KcoordProcess, java_peer) -> None:  # type: ignore[no-untyped-def]
    topic, group = unique("j848-admin"), unique("j848-admin-group")
    every = partitions(topic, 3)
    create_topic(kcoord.bootstrap, topic, 3)
    produce_numbered(kcoord.bootstrap, topic, 30, 3)
    member = java_peer(
        "ConsumerPeer", consumer_args(kcoord, group, "--topic", topic, "--commit"), name="j848-admin"
    )
    wait_until(lambda: owned(member) == every, 30, "the member gets every partition")
    wait_until(
        lambda: sum((member.latest("committed") or {}).get("offsets", {}).values()) == 30, 20, "30 committed"
    )

    described = run_admin(kcoord.bootstrap, "describe", group)["groups"][0]
    assert described["type"].upper() == "CONSUMER", described
    assert described["state"].upper() == "STABLE", described
    assert described["partitionAssignor"] == "uniform", described
    (only,) = described["members"]
    assert only["memberId"] == member.latest("assigned")["memberId"]  # type: ignore[index]
    assert set(only["assignment"]) == every, described

    listed = {g["groupId"]: g for g in run_admin(kcoord.bootstrap, "list-groups")["groups"]}
    assert listed[group]["type"].lower() == "consumer", listed[group]
    assert listed[group]["protocol"] == "consumer", listed[group]  # Kafka: a consumer group's protocol type

    assert committed_offsets(kcoord, group) == {tp: 10 for tp in every}

    print(f"describe {described}; list-groups {listed[group]}")
    refused = run_admin(kcoord.bootstrap, "delete-groups", group)["results"]
    assert refused == {group: "GroupNotEmptyException"}, refused
    assert member.stop() == 0  # a dynamic member's close leaves the group (epoch -1)
    deleted = run_admin(kcoord.bootstrap, "delete-groups", group)["results"]
    assert deleted == {group: "OK"}, deleted
    assert group not in {g["groupId"] for g in run_admin(kcoord.bootstrap, "list-groups")["groups"]}
