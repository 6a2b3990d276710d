"""docs/operations.md's metrics table and the metrics kcoord exports name the same metrics: every
exported metric has a row, every name in a row is exported. The registry is an App's, with what
App.start() and the event topic's writer add to it; tests/integration/test_metrics.py checks the
table against a running kcoord's scrape as well."""

from __future__ import annotations

import sys

import pytest
from prometheus_client import generate_latest

from kcoord.coordinator.net.server import App
from kcoord.coordinator.ops.event_topic import EventTopicWriter
from kcoord.coordinator.ops.settings import Settings
from kcoord.storage.memory import MemoryStorage
from tests.support.monitoring import documented_metrics, exported_metrics


def app_exposition() -> str:
    """An App's /metrics text before any traffic: every family is there (labelled ones without
    samples still have their ``# TYPE`` line)."""
    app = App(Settings(storage="memory"), storage=MemoryStorage())
    app.metrics.watch_shards(lambda: [], lambda: 0)  # as App.start() does
    app.metrics.watch_buffers(lambda: 0, lambda: 0, lambda: 0)
    EventTopicWriter([("127.0.0.1", 9)], "events", registry=app.metrics.registry)  # events.topic on
    return generate_latest(app.metrics.registry).decode()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the process_* metrics read Linux's /proc")
def test_every_exported_metric_is_documented_and_every_documented_one_exported() -> None:
    exported = exported_metrics(app_exposition())
    documented = documented_metrics()
    assert sorted(exported - documented) == [], "exported but not in docs/operations.md's metrics table"
    assert sorted(documented - exported) == [], "in docs/operations.md's metrics table but not exported"


def test_the_table_is_read_row_by_row_with_several_names_to_a_row() -> None:
    documented = documented_metrics()
    # A row naming two metrics, a histogram, a counter and the process metrics' row.
    assert {"kcoord_storage_append_seconds", "kcoord_storage_append_batch_records"} <= documented
    assert {"kcoord_request_latency_seconds", "kcoord_requests_total", "process_open_fds"} <= documented
    assert not any(name.endswith(("_bucket", "_count", "_sum")) for name in documented)
