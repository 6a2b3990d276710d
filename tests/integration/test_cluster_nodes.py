"""Nodes of a kcoord cluster.

- Bad input: a second process with a node id already in use, and a node with another shard count,
  are refused; neither serves a shard another live node owns; each says why in one ERROR line.
- A node cut off from the upstream (a proxy the test stalls) stops serving its shards before
  another node takes them, and gets shards back once the network heals.
- ``kcoord groups shards`` shows which node serves each shard.
- A transactional producer whose transaction coordinator is another node than the group's
  commits its offsets (AddOffsetsToTxn forwarded).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer

from kcoord.coordinator.cli import main as kcoord_main
from kcoord.coordinator.runtime.router import shard_for_group
from support.kcoord_cluster import BASE_NODE_ID, KcoordCluster, committed_offsets
from support.kcoord_process import KcoordProcess
from support.workload import create_topic, produce_numbered, unique
from tests.support.fault_upstream import FaultUpstream
from tests.support.fixtures import Upstream

pytestmark = pytest.mark.integration

SHARDS = 6
# Apache Kafka's group.min.session.timeout.ms (tansu takes less, Kafka answers INVALID_SESSION_TIMEOUT).
CLUSTER_SESSION_MS = 6000


@pytest.fixture(scope="module")
def cluster(upstream: Upstream) -> Iterator[KcoordCluster]:
    """One 2-node cluster for the tests that leave it as they found it: a refused process never joins
    (the refused-duplicate test waits until the cluster has settled on the same shards again), and
    the others only read it or use groups and topics of their own. The cut-off test mutates its
    cluster, so it starts its own."""
    nodes = KcoordCluster(
        upstream.bootstrap, size=2, shards=SHARDS, session_timeout_ms=CLUSTER_SESSION_MS
    ).start()
    try:
        yield nodes
    finally:
        nodes.stop()


def exit_code(proc: KcoordProcess, timeout: float) -> int:
    assert proc.process is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = proc.process.poll()
        if code is not None:
            return code
        time.sleep(0.2)
    raise AssertionError(f"still running after {timeout}s:\n{proc.log_tail()}")


def test_a_second_process_with_a_node_id_in_use_is_refused(cluster: KcoordCluster) -> None:
    before = cluster.latest_view()
    duplicate = cluster._process(BASE_NODE_ID + 1)
    # It may be refused before start() saw it serve: on Kafka its JoinGroup is answered in ~50 ms.
    with contextlib.suppress(RuntimeError):
        duplicate.start()
    try:
        assert exit_code(duplicate, 40) == 3, duplicate.log_tail()
    finally:
        duplicate.kill()
    text = duplicate.log_path.read_text()
    assert f"node id {BASE_NODE_ID + 1} is already in use by the node at" in text, duplicate.log_tail()
    assert "this node releases every shard and stops" in text
    assert "gains" not in text  # it never served a shard
    after = cluster.wait_for_members(set(cluster.nodes), timeout=30)
    assert {n: v[1] for n, v in before.items()} == after  # the cluster's shards did not move
    assert not cluster.overlapping_owners()


def test_a_node_with_another_shard_count_is_refused_at_start(cluster: KcoordCluster) -> None:
    other = KcoordProcess(
        "--shards",
        str(SHARDS + 2),
        "--internal-topic",
        cluster.topic,
        "--coordinator-node-id",
        str(BASE_NODE_ID + 7),
        "--cluster-enabled",
        "true",
        "--cluster-static-membership",
        "false",
        bootstrap=cluster.upstream,
    )
    with pytest.raises(RuntimeError, match="exited with 1"):
        other.start(timeout=40)
    text = other.log_path.read_text()
    assert f"has {SHARDS} partitions but kcoord runs {SHARDS + 2} shards" in text, other.log_tail()
    assert "joining group" not in text


def test_groups_shards_shows_which_node_serves_each_shard(
    cluster: KcoordCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    view = cluster.latest_view()
    code = kcoord_main(
        [
            "groups",
            "--bootstrap-server",
            cluster.bootstrap,
            "--json",
            "shards",
            "--internal-topic",
            cluster.topic,
        ]
    )
    assert code == 0
    rows = json.loads(capsys.readouterr().out)
    expected = {shard: node for node, (_, shards, _) in view.items() for shard in shards}
    assert {r["shard"]: r["node"] for r in rows} == expected
    ports = {node: proc.port for node, proc in cluster.nodes.items()}
    assert all(r["address"] == f"127.0.0.1:{ports[r['node']]}" for r in rows)


def test_a_node_cut_off_from_the_upstream_stops_serving_before_another_takes_its_shards(
    upstream: Upstream,
) -> None:
    host, port = upstream.bootstrap.rsplit(":", 1)
    cut = BASE_NODE_ID + 2
    with FaultUpstream(target=(host, int(port))) as proxy:
        nodes = KcoordCluster(
            upstream.bootstrap,
            size=3,
            shards=SHARDS,
            session_timeout_ms=CLUSTER_SESSION_MS,
            upstreams={cut: proxy.address},
        )
        try:
            nodes.start()
            held = nodes.latest_view()[cut][1]
            assert held
            proxy.pause()
            paused_at = time.time()
            deadline = time.monotonic() + 30
            moved: dict[int, float] = {}
            while time.monotonic() < deadline and set(moved) != held:
                for e in nodes.shard_events():
                    if e.gained and e.node != cut and e.shard in held and e.at > paused_at:
                        moved.setdefault(e.shard, e.at)
                time.sleep(0.2)
            assert set(moved) == held, nodes.latest_view()
            text = nodes.nodes[cut].log_path.read_text()
            released = [line for line in text.splitlines() if "no answer from the group coordinator" in line]
            assert released, nodes.nodes[cut].log_tail()
            released_at = next(
                e.at for e in nodes.shard_events() if e.node == cut and not e.gained and e.at > paused_at
            )
            assert released_at < min(moved.values()), (released_at, moved)
            assert not nodes.overlapping_owners()
            proxy.resume()
            nodes.wait_for_members(
                set(nodes.nodes), timeout=60
            )  # the healed node rejoins and gets shards back
            assert not nodes.overlapping_owners()
        finally:
            nodes.stop()


def test_transactional_offsets_reach_the_node_serving_the_group(cluster: KcoordCluster) -> None:
    """A producer's transaction coordinator is a broker port of whichever node it asked; its
    AddOffsetsToTxn is forwarded to the node serving the group, which adds its partition to the
    transaction (exactly-once across nodes)."""
    view = cluster.latest_view()
    owner, other = BASE_NODE_ID, BASE_NODE_ID + 1
    group = next(
        g for g in (unique("eos") for _ in range(10_000)) if shard_for_group(g, SHARDS) in view[owner][1]
    )
    source, sink = unique("eos-src"), unique("eos-dst")
    create_topic(cluster.bootstrap, source, 1)
    create_topic(cluster.bootstrap, sink, 1)
    produce_numbered(cluster.bootstrap, source, 50, 1)
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([source])
    producer = Producer(
        {"bootstrap.servers": cluster.nodes[other].bootstrap, "transactional.id": unique("tx")}
    )
    try:
        producer.init_transactions(30)
        processed = 0
        deadline = time.monotonic() + 60
        while processed < 50 and time.monotonic() < deadline:
            msgs = [msg for msg in consumer.consume(10, 1.0) if msg.error() is None]
            if not msgs:
                continue
            producer.begin_transaction()
            for msg in msgs:
                producer.produce(sink, msg.value())
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
            )
            producer.commit_transaction(30)
            processed += len(msgs)
    finally:
        consumer.close()
    assert processed == 50
    deadline = time.monotonic() + 10
    while committed_offsets(cluster.bootstrap, group) != {0: 50} and time.monotonic() < deadline:
        time.sleep(0.2)  # the last commit marker is replayed within the shard's follow interval
    assert committed_offsets(cluster.bootstrap, group) == {0: 50}
    assert "forwarding" not in cluster.nodes[other].log_path.read_text()  # no forward failed
