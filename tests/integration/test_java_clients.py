"""The stock Java client (kafka-clients 4.3.0, classic protocol) and Kafka Connect's group member
use kcoord as their coordinator, in front of tansu and of Apache Kafka in turn: commitSync, KIP-345 static membership (restart without a
rebalance, fencing of a duplicate instance id, removal by instance id through the AdminClient)
and KIP-415 incremental cooperative rebalancing between Connect workers.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from support.java import JavaPeer, run_admin
from support.kcoord_process import KcoordProcess
from support.workload import create_topic, produce_numbered, unique
from tests.support.connect_scenario import two_workers_share_work
from tests.support.fixtures import Upstream

pytestmark = pytest.mark.integration

PARTITIONS = 6


@pytest.fixture(scope="module")
def kcoord(upstream: Upstream) -> Iterator[KcoordProcess]:
    # An internal topic of its own: the upstream is shared by the whole session, and two kcoords on
    # one topic fence each other (or refuse to start on another shard count).
    args = ("--shards", "8", "--internal-topic", unique("__kcoord_java"))
    with KcoordProcess(*args, bootstrap=upstream.bootstrap) as proc:
        yield proc


def consumer_args(kcoord: KcoordProcess, group: str, topic: str, *extra: str) -> list[str]:
    return [
        "--bootstrap",
        kcoord.bootstrap,
        "--group",
        group,
        "--topic",
        topic,
        "--max-seconds",
        "240",
        *extra,
    ]


def latest_assignment(peer: JavaPeer) -> dict[str, Any] | None:
    return peer.latest("assigned")


def settled(peers: list[JavaPeer]) -> int | None:
    """The generation all peers agree on, when their assignments split the topic cleanly."""
    latest = [latest_assignment(p) for p in peers]
    if any(a is None for a in latest):
        return None
    generations = {a["generation"] for a in latest}  # type: ignore[index]
    owned = [tuple(a["current"]) for a in latest]  # type: ignore[index]
    flat = [tp for o in owned for tp in o]
    if len(generations) == 1 and len(flat) == PARTITIONS and len(set(flat)) == PARTITIONS:
        return generations.pop()
    return None


def wait_settled(peers: list[JavaPeer], timeout: float = 90) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        generation = settled(peers)
        if generation is not None:
            return generation
        time.sleep(0.2)
    raise AssertionError(f"group did not settle: {[latest_assignment(p) for p in peers]}")


def test_java_consumer_commit_sync(kcoord: KcoordProcess, java_peer) -> None:
    topic, group = unique("java-commit"), unique("java-commit-group")
    create_topic(kcoord.bootstrap, topic, 3)
    produce_numbered(kcoord.bootstrap, topic, 300, 3)
    peer = java_peer("ConsumerPeer", consumer_args(kcoord, group, topic, "--commit", "--max-records", "300"))
    peer.wait_for("records", lambda e: e["total"] >= 300, timeout=90)
    assert peer.wait_for("closed", timeout=30)["exitCode"] == 0
    committed = [e for e in peer.events if e["event"] == "committed"][-1]["offsets"]
    assert sum(committed.values()) == 300  # each partition's next offset: 100 + 100 + 100
    fetched = run_admin(kcoord.bootstrap, "list-offsets", group)
    assert {tp: o["offset"] for tp, o in fetched["offsets"].items()} == committed


def test_static_membership_restart_fence_and_remove(kcoord: KcoordProcess, java_peer) -> None:
    topic, group = unique("static"), unique("static-group")
    create_topic(kcoord.bootstrap, topic, PARTITIONS)
    static = ["--session-timeout-ms", "30000", "--close", "remain", "--assignor", "range", "--commit"]
    peers = {
        iid: java_peer(
            "ConsumerPeer", consumer_args(kcoord, group, topic, "--instance-id", iid, *static), name=iid
        )
        for iid in ("s1", "s2", "s3")
    }
    generation = wait_settled(list(peers.values()))
    before = {iid: sorted(latest_assignment(p)["current"]) for iid, p in peers.items()}  # type: ignore[index]

    described = run_admin(kcoord.bootstrap, "describe", group)["groups"][0]
    assert described["state"].upper() == "STABLE"
    assert sorted(mbr["groupInstanceId"] for mbr in described["members"]) == ["s1", "s2", "s3"]

    # Restart s2 within its session timeout: no rebalance, same generation, same partitions.
    assert peers["s2"].stop() == 0
    restarted = java_peer(
        "ConsumerPeer", consumer_args(kcoord, group, topic, "--instance-id", "s2", *static), name="s2b"
    )
    again = restarted.wait_for("assigned", timeout=60)
    assert again["generation"] == generation
    assert sorted(again["current"]) == before["s2"]
    time.sleep(3)  # give a (wrong) rebalance time to show up on the others
    for iid in ("s1", "s3"):
        assert latest_assignment(peers[iid])["generation"] == generation  # type: ignore[index]
        assert peers[iid].latest("revoked") is None or all(
            e["generation"] < generation or not e["partitions"]
            for e in peers[iid].events
            if e["event"] == "revoked"
        )
    peers["s2"] = restarted

    # A second process with instance id s1 while s1 is alive: one of the two is fenced.
    duplicate = java_peer(
        "ConsumerPeer", consumer_args(kcoord, group, topic, "--instance-id", "s1", *static), name="dup"
    )
    duplicate.wait_for("assigned", timeout=60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (peers["s1"].latest("fenced") or duplicate.latest("fenced")):
        time.sleep(0.2)
    fenced = [p for p in (peers["s1"], duplicate) if p.latest("fenced")]
    assert len(fenced) == 1, "exactly one holder of instance id s1 must be fenced"
    survivor = duplicate if fenced[0] is peers["s1"] else peers["s1"]
    live = [survivor, peers["s2"], peers["s3"]]
    assert wait_settled(live) >= generation  # no partition owned twice among live members

    # s3 goes away without leaving (a static member's close); rather than waiting out its 30 s
    # session, the operator removes it by instance id and the others rebalance to cover it at once.
    assert peers["s3"].stop() == 0
    removed = run_admin(kcoord.bootstrap, "remove-members", group, "s3")
    assert removed["results"] == {"s3": "OK"}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        owned = [
            tp for p in (survivor, peers["s2"]) for tp in (latest_assignment(p) or {}).get("current", [])
        ]
        if len(owned) == PARTITIONS and len(set(owned)) == PARTITIONS:
            break
        time.sleep(0.2)
    else:
        raise AssertionError("remaining members did not take over s3's partitions")
    described = run_admin(kcoord.bootstrap, "describe", group)["groups"][0]
    assert sorted(mbr["groupInstanceId"] for mbr in described["members"]) == ["s1", "s2"]
    unknown = run_admin(kcoord.bootstrap, "remove-members", group, "nobody")
    assert unknown["results"]["nobody"] != "OK"


def test_connect_workers_rebalance_incrementally(kcoord: KcoordProcess, java_peer) -> None:
    two_workers_share_work(kcoord.bootstrap, unique("connect"), java_peer, session_ms=10000)
