"""A kcoord cluster refuses nodes that would break it (issue #14, "Bad input"): a second process with a
node id already in use, and a node with another shard count. Neither may serve a shard another live
node owns; each says why in one ERROR line and exits."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.support.broker import TansuBroker
from tests.support.kcoord_cluster import BASE_NODE_ID, KcoordCluster
from tests.support.kcoord_process import KcoordProcess

pytestmark = pytest.mark.integration

SHARDS = 6


@pytest.fixture
def cluster(tansu: TansuBroker) -> Iterator[KcoordCluster]:
    nodes = KcoordCluster(tansu.bootstrap, size=2, shards=SHARDS, session_timeout_ms=4000).start()
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
        "--shards", str(SHARDS + 2), "--internal-topic", cluster.topic, "--coordinator-node-id", str(BASE_NODE_ID + 7),
        "--cluster-enabled", "true", "--cluster-static-membership", "false", bootstrap=cluster.upstream,
    )
    with pytest.raises(RuntimeError, match="exited with 1"):
        other.start(timeout=40)
    text = other.log_path.read_text()
    assert f"has {SHARDS} partitions but kcoord runs {SHARDS + 2} shards" in text, other.log_tail()
    assert "joining group" not in text
