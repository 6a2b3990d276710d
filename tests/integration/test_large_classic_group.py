"""A classic group whose GroupMetadata record is larger than the internal topic takes, on each upstream.

5,000 members (raw wire JoinGroup v3 / SyncGroup v2 from ``support/big_group.py``; a real client per
member is far too heavy here), each with a two-topic subscription and a ~100-byte assignment: the
group's record is ~1.3 MB, over the 1 MB a topic with Kafka's default max.message.bytes takes (Kafka
4.0's own coordinator fails the leader's SyncGroup for such a group and it rebalances for ever).
kcoord writes it split; the group reaches Stable, and after kcoord is killed and restarted the
generation, members and assignments are back: every member's Heartbeat answers NONE at that
generation, a member's SyncGroup returns its assignment, DescribeGroups shows every assignment.

``KCOORD_TEST_BIG_GROUP_MEMBERS`` sets the size (default 5,000; 20,000 for the figures in
bench/RESULTS.md, which take a few minutes per upstream).
"""

from __future__ import annotations

import asyncio
import os
import re
import time
import uuid

import pytest

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.record_batch import DEFAULT_MAX_RECORD_BYTES
from support import big_group
from support.kcoord_process import KcoordProcess
from support.workload import unique
from tests.support.fixtures import Upstream

pytestmark = pytest.mark.integration

MEMBERS = int(os.environ.get("KCOORD_TEST_BIG_GROUP_MEMBERS", "5000"))


def kcoord_on(upstream: Upstream, internal_topic: str, port: int | None = None) -> KcoordProcess:
    return KcoordProcess(
        "--shards", "2", "--storage", "kafka", "--internal-topic", internal_topic,
        "--group-initial-rebalance-delay-ms", "1000",
        bootstrap=upstream.bootstrap, port=port,
    )  # fmt: skip


def test_a_group_too_large_for_one_record_reaches_stable_and_reloads(upstream: Upstream) -> None:
    internal = f"__kcoord_big_{uuid.uuid4().hex[:8]}"
    group = unique("big")
    kcoord = kcoord_on(upstream, internal).start(timeout=120)
    try:
        formed = asyncio.run(big_group.form(kcoord.bootstrap, group, MEMBERS))
        assert formed.stable, (formed.join_errors, formed.sync_errors, kcoord.log_tail())
        assert len(formed.plan) == MEMBERS
        log = kcoord.log_path.read_text()
        split = re.search(rf"group {group}: the leader's assignment makes a (\d+)-byte group record with "
                          rf"{MEMBERS} members.*written as (\d+) part records", log)  # fmt: skip
        assert split is not None, kcoord.log_tail()
        assert int(split.group(1)) > DEFAULT_MAX_RECORD_BYTES and int(split.group(2)) >= 2
        print(f"\n{MEMBERS} members on {type(upstream).__name__}: record {split.group(1)} bytes in "
              f"{split.group(2)} parts; join {formed.join_s:.1f}s, sync {formed.sync_s:.1f}s")  # fmt: skip
    finally:
        kcoord.kill()  # a crash: nothing flushed on the way out

    started = time.monotonic()
    with kcoord_on(upstream, internal, port=kcoord.port) as restarted:
        served = asyncio.run(big_group.wait_served(restarted.bootstrap, formed))
        print(f"reload: served {time.monotonic() - started:.1f}s after start ({served:.1f}s after listening)")
        codes = asyncio.run(big_group.heartbeats(restarted.bootstrap, formed))
        assert codes == {ErrorCode.NONE: MEMBERS}, codes

        member = list(formed.plan)[MEMBERS // 2]
        resynced = asyncio.run(big_group.resync(restarted.bootstrap, formed, member))
        assert resynced.error_code == ErrorCode.NONE and resynced.assignment == formed.plan[member]

        described = asyncio.run(big_group.describe(restarted.bootstrap, group))
        assert described.error_code == ErrorCode.NONE and described.group_state == "Stable"
        assert {mb.member_id: mb.member_assignment for mb in described.members} == formed.plan
        assert "MissingPartError" not in restarted.log_path.read_text()
