"""kcoord creates its event topic again when it is deleted upstream, and events flow into it again.

One kcoord (``--storage memory``: only the event topic is on the upstream) per upstream. A commit
through kcoord becomes a ``commits`` event in the topic; the topic is then deleted on the upstream
itself (kcoord refuses to delete its own topics for a client). Apache Kafka refuses the next Produce
(UNKNOWN_TOPIC_OR_PARTITION); tansu takes it and keeps nothing, so there only the writer's
Metadata check (every 5 s) sees the topic gone. Either way the topic is back, with its partitions,
holding the next commit's event, and kcoord logged the loss once (not a "produce failed" every retry).
"""

from __future__ import annotations

import json
import time

import pytest
from kafka import KafkaAdminClient

from kcoord.analytics import kafka_io
from support.kcoord_process import KcoordProcess
from support.workload import create_topic, unique, wait_until
from tests.support.fixtures import Upstream
from tests.support.wire import commit_offset

pytestmark = pytest.mark.integration

PARTITIONS = 3  # events.partitions: the re-created topic has them too


def groups_with_commits(bootstrap: str, topic: str) -> set[str]:
    """The groups of the ``commits`` events in ``topic`` on the upstream; empty when it is missing."""
    try:
        if not kafka_io.partitions(bootstrap, topic):
            return set()
        records = kafka_io.read_all(bootstrap, topic)
    except Exception:  # the topic is between deletion and creation
        return set()
    out = set()
    for *_, value in records:
        event = json.loads(value or b"{}")
        if event.get("type") == "commits":
            out.add(event["group"])
    return out


def state_of(line: str) -> str | None:
    for text, state in (("gone upstream", "missing"), ("writing again", "writing"), ("retrying", "failing")):
        if text in line:
            return state
    return None


def test_a_deleted_event_topic_is_created_again_and_events_flow(upstream: Upstream) -> None:
    events, data = unique("__kcoord_events_gone"), unique("evt-data")
    create_topic(upstream.bootstrap, data, 1)
    kcoord = KcoordProcess(
        "--storage", "memory", "--shards", "2", "--events-topic", events,
        "--events-partitions", str(PARTITIONS),
        bootstrap=upstream.bootstrap,
    ).start()  # fmt: skip
    try:
        before, after = unique("evt-before"), unique("evt-after")
        assert commit_offset(kcoord.bootstrap, before, data, 1) == 0
        wait_until(lambda: before in groups_with_commits(upstream.bootstrap, events), 30, "the first event")
        admin = KafkaAdminClient(bootstrap_servers=upstream.bootstrap)
        try:
            admin.delete_topics([events])
        finally:
            admin.close()
        wait_until(lambda: not kafka_io.partitions(upstream.bootstrap, events), 30, "the topic deleted")
        deleted_at = time.monotonic()

        # commit until its event is in the topic: on tansu the events the writer produced before its
        # check saw the topic gone were acknowledged into nowhere
        def arrived() -> bool:
            assert commit_offset(kcoord.bootstrap, after, data, 2) == 0
            return after in groups_with_commits(upstream.bootstrap, events)

        wait_until(arrived, 40, "an event in the re-created topic", interval=1.0)
        assert len(kafka_io.partitions(upstream.bootstrap, events)) == PARTITIONS
        assert time.monotonic() - deleted_at < 30
        assert len(kcoord.wait_for_log("gone upstream")) == 1
        kcoord.wait_for_log("writing again")
        # one line per change of the writer's state, never the same state twice in a row (tansu may
        # refuse a Produce or two right after the creation: a failure, then writing again)
        states = [state_of(line) for line in kcoord.log_lines(f"event topic {events}: ")]
        states = [s for s in states if s is not None]
        assert all(a != b for a, b in zip(states, states[1:], strict=False)), states
    finally:
        kcoord.stop()
