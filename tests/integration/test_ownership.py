"""A kcoord that lost its shards stops serving them: fenced by another kcoord, or the topic gone.

Real processes: two kcoord processes on one upstream broker (tansu, then Apache Kafka) and one
internal topic, or one kcoord whose internal topic is deleted under it (idle, or under 100 groups
committing: support/topic_loss.py). Requests are exact wire requests (tests/support/wire.py).
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
import uuid
from collections.abc import Callable

import pytest
from kafka.admin import KafkaAdminClient

from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode
from support.kcoord_process import KcoordProcess
from support.ports import free_port_block
from support.topic_loss import count_log_events, read_back, run_scenario
from support.workload import create_topic, unique
from tests.support.fixtures import Upstream
from tests.support.wire import WireClient, commit_offset, fetch_offset

pytestmark = pytest.mark.integration

TOPIC = "ownership-data"  # committed offsets name a topic that exists upstream


@pytest.fixture(scope="module")
def data_topic(upstream: Upstream) -> str:
    create_topic(upstream.bootstrap, TOPIC, 1)
    return TOPIC


def start_kcoord(upstream: Upstream, offsets_topic: str, *extra: str) -> KcoordProcess:
    return KcoordProcess(
        "--shards",
        "2",
        "--storage",
        "kafka",
        "--internal-topic",
        offsets_topic,
        *extra,
        bootstrap=upstream.bootstrap,
    ).start()


def commit(address: str, group: str, offset: int) -> int:
    return commit_offset(address, group, TOPIC, offset)


def fetch(address: str, group: str) -> tuple[int, int]:
    return fetch_offset(address, group, TOPIC)


def describe(address: str, group: str) -> int:
    with WireClient(address) as client:
        response = client.request(15, 5, m.DescribeGroupsRequest(groups=[group]))
    return response.groups[0].error_code


def heartbeat(address: str, group: str) -> int:
    with WireClient(address) as client:
        response = client.request(12, 4, m.HeartbeatRequest(group_id=group, generation_id=1, member_id="m-1"))
    return response.error_code


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> float:
    """Seconds until ``condition()`` held; fails the test after ``timeout``."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.05)
    return time.monotonic() - start


def test_refresh_never_takes_back_a_shard_another_kcoord_fenced(upstream: Upstream, data_topic: str) -> None:
    """The periodic ownership refresh of a fenced kcoord must not fence the new
    owner and then serve its own stale state. Only the refresh acts here: the tail check is off."""
    offsets_topic, group = f"__kcoord_own_{uuid.uuid4().hex[:8]}", unique("split-brain")
    first = start_kcoord(
        upstream,
        offsets_topic,
        "--ownership-refresh-interval-ms",
        "1500",
        "--ownership-check-interval-ms",
        "3600000",
    )
    second: KcoordProcess | None = None
    try:
        assert commit(first.bootstrap, group, 10) == ErrorCode.NONE
        second = start_kcoord(upstream, offsets_topic, "--ownership-refresh-interval-ms", "3600000")
        assert commit(second.bootstrap, group, 30) == ErrorCode.NONE
        time.sleep(4.0)  # two refreshes of the first kcoord
        # The first must not answer from its old state (10 where 30 was acknowledged), nor accept commits.
        assert fetch(first.bootstrap, group) == (ErrorCode.NOT_COORDINATOR, -1)
        assert commit(first.bootstrap, group, 11) == ErrorCode.NOT_COORDINATOR
        # The second still owns the shard.
        assert commit(second.bootstrap, group, 31) == ErrorCode.NONE
        assert fetch(second.bootstrap, group) == (ErrorCode.NONE, 31)
        assert "owner of" in second.log_tail(400)
    finally:
        first.kill()
        if second is not None:
            second.kill()


def test_a_fenced_kcoord_stops_serving_reads_within_the_check_interval(
    upstream: Upstream, data_topic: str
) -> None:
    """No stale OffsetFetch/DescribeGroups/Heartbeat answers with error NONE
    once another kcoord took the shard, although the fenced one never writes again."""
    offsets_topic, group = f"__kcoord_own_{uuid.uuid4().hex[:8]}", unique("stale-read")
    first = start_kcoord(upstream, offsets_topic, "--ownership-check-interval-ms", "300")
    second: KcoordProcess | None = None
    try:
        assert commit(first.bootstrap, group, 10) == ErrorCode.NONE
        assert fetch(first.bootstrap, group) == (ErrorCode.NONE, 10)
        second = start_kcoord(upstream, offsets_topic)
        assert commit(second.bootstrap, group, 30) == ErrorCode.NONE
        took = wait_for(
            lambda: fetch(first.bootstrap, group)[0] == ErrorCode.NOT_COORDINATOR,
            5.0,
            "the fenced kcoord answers OffsetFetch with NOT_COORDINATOR",
        )
        assert took < 5.0
        assert describe(first.bootstrap, group) == ErrorCode.NOT_COORDINATOR
        assert heartbeat(first.bootstrap, group) == ErrorCode.NOT_COORDINATOR
        assert fetch(second.bootstrap, group) == (ErrorCode.NONE, 30)
        assert "fenced" in first.log_tail(200)
    finally:
        first.kill()
        if second is not None:
            second.kill()


def _readiness(port: int) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _delete_topic(upstream: Upstream, topic: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=upstream.bootstrap)
    try:
        admin.delete_topics([topic])
    finally:
        admin.close()


def topics_of(upstream: Upstream) -> set[str]:
    admin = KafkaAdminClient(bootstrap_servers=upstream.bootstrap)
    try:
        return set(admin.list_topics())
    finally:
        admin.close()


def test_a_commit_written_into_a_deleted_topic_is_never_acknowledged(
    upstream: Upstream, data_topic: str
) -> None:
    """tansu acknowledges a Produce to a deleted topic (the data goes nowhere);
    kcoord sees that the write landed below the end of the log it loaded. Apache Kafka refuses it
    with UNKNOWN_TOPIC_OR_PARTITION; kcoord asks whether the topic is gone rather than retrying
    until its append timeout. Either way it must not acknowledge the commit, and answers at once.
    The periodic check is off, so only the write path can notice."""
    offsets_topic, group = f"__kcoord_own_{uuid.uuid4().hex[:8]}", unique("void-write")
    kcoord = start_kcoord(upstream, offsets_topic, "--ownership-check-interval-ms", "3600000")
    try:
        for offset in range(1, 6):
            assert commit(kcoord.bootstrap, group, offset) == ErrorCode.NONE
        _delete_topic(upstream, offsets_topic)
        # Kafka's DeleteTopics answers once the controller decided; the broker drops the partition a
        # moment later and acknowledges a Produce until then (into a log about to go): wait for that.
        wait_for(
            lambda: offsets_topic not in topics_of(upstream), 10.0, "the deleted topic leaves the metadata"
        )
        assert commit(kcoord.bootstrap, group, 6) != ErrorCode.NONE
        assert (
            fetch(kcoord.bootstrap, group)[0] != ErrorCode.NONE
        )  # it does not answer from lost state either
        assert "lost" in kcoord.log_tail(200)
    finally:
        kcoord.kill()


def test_a_deleted_internal_topic_stops_its_shards_and_is_recreated(
    upstream: Upstream, data_topic: str
) -> None:
    """The topic disappears while kcoord is idle. Within the check interval the
    shards stop serving and /readyz and the log say why; kcoord re-creates the topic, serves again,
    and what it acknowledges then survives a kill -9."""
    offsets_topic, group = f"__kcoord_own_{uuid.uuid4().hex[:8]}", unique("lost-topic")
    metrics_port = free_port_block(1)
    kcoord = start_kcoord(
        upstream,
        offsets_topic,
        "--ownership-check-interval-ms",
        "300",
        "--metrics",
        f"127.0.0.1:{metrics_port}",
    )
    restarted: KcoordProcess | None = None
    try:
        assert commit(kcoord.bootstrap, group, 7) == ErrorCode.NONE
        assert _readiness(metrics_port)[0] == 200
        _delete_topic(upstream, offsets_topic)
        wait_for(lambda: "lost" in kcoord.log_tail(400), 5.0, "the log says the shards' log was lost")
        # Recovered: the topic is back (empty: its records were deleted upstream) and kcoord serves again.
        wait_for(lambda: commit(kcoord.bootstrap, group, 8) == ErrorCode.NONE, 20.0, "kcoord serves again")
        assert fetch(kcoord.bootstrap, group) == (ErrorCode.NONE, 8)
        status, body = _readiness(metrics_port)
        assert status == 200, body
        assert body.get("log_lost_total", 0) >= 1, body
        kcoord.kill()
        restarted = start_kcoord(upstream, offsets_topic)
        assert fetch(restarted.bootstrap, group) == (ErrorCode.NONE, 8)
    finally:
        kcoord.kill()
        if restarted is not None:
            restarted.kill()


HEAL_GROUPS = 100
HEAL_SHARDS = 10
HEAL_PARTITIONS = 20  # each commit before the delete names this many partitions (a big batch per shard)
HEAL_BOUND_S = 10.0  # every group served again within this many seconds of the delete


def test_every_group_is_served_again_within_seconds_after_the_internal_topic_is_deleted(
    upstream: Upstream,
) -> None:
    """100 groups over 10 shards keep committing (each commit names 20 partitions before the delete,
    so the batches are big, and 1 after it) when the internal topic is deleted. kcoord re-creates it
    and every group's commit is acknowledged and read back as written within 10 s of the delete,
    with about one load per shard, never an answer from lost state; what it acknowledged after that
    survives a kill -9. On tansu the batches acknowledged into the deleted topic come back in the
    re-created one below its next offset (docs/tansu.md): before kcoord wrote past them, every
    write tripped the "acknowledged below what was loaded" check and reloaded its shard again, for
    minutes."""
    data_topic, offsets_topic = unique("heal-data"), f"__kcoord_heal_{uuid.uuid4().hex[:8]}"
    create_topic(upstream.bootstrap, data_topic, HEAL_PARTITIONS)
    groups = [unique(f"heal-{i}") for i in range(HEAL_GROUPS)]
    args = ("--shards", str(HEAL_SHARDS), "--storage", "kafka", "--internal-topic", offsets_topic)
    kcoord = KcoordProcess(*args, bootstrap=upstream.bootstrap).start()
    restarted: KcoordProcess | None = None
    try:
        loads_before = count_log_events(kcoord.log_path, "shard.loaded")
        report = asyncio.run(
            run_scenario(
                kcoord.bootstrap,
                upstream.bootstrap,
                offsets_topic,
                data_topic,
                groups,
                bound=HEAL_BOUND_S,
                warmup=1.0,
                partitions=20,
                pause=0.1,
            )  # fmt: skip
        )
        loads = count_log_events(kcoord.log_path, "shard.loaded") - loads_before
        assert not report.timed_out, (
            f"{len(report.timed_out)} of {HEAL_GROUPS} groups not served again within {HEAL_BOUND_S} s "
            f"of the delete ({loads} shard loads since):\n{kcoord.log_tail(30)}"
        )
        assert report.inconsistent_reads() == {}
        assert loads <= 2 * HEAL_SHARDS, f"{loads} shard loads for {HEAL_SHARDS} shards"
        kcoord.kill()
        restarted = KcoordProcess(*args, bootstrap=upstream.bootstrap).start()
        after = asyncio.run(read_back(restarted.bootstrap, data_topic, groups))
        lost = {
            g.group: (g.acknowledged, after[g.group])
            for g in report.groups
            if not (
                after[g.group][0] == ErrorCode.NONE and g.acknowledged <= after[g.group][1] <= g.attempted
            )
        }
        assert lost == {}, "acknowledged commits read back otherwise after a restart: (acknowledged, read)"
    finally:
        kcoord.kill()
        if restarted is not None:
            restarted.kill()
