"""The garbage collector's pauses reach a histogram per generation, and a long one a log line."""

from __future__ import annotations

import gc
import logging

import pytest
from prometheus_client import CollectorRegistry

from kcoord.coordinator.ops.gc_pauses import GcPauseWatch


def count(registry: CollectorRegistry, generation: int) -> float:
    value = registry.get_sample_value("kcoord_gc_pause_seconds_count", {"generation": str(generation)})
    return value or 0.0


def test_collections_are_timed_per_generation_and_long_ones_logged(caplog: pytest.LogCaptureFixture) -> None:
    registry = CollectorRegistry()
    watch = GcPauseWatch(registry, warn_after_s=0.0)  # every pause counts as long here
    watch.install()
    try:
        with caplog.at_level(logging.WARNING, logger="kcoord.gc"):
            gc.collect(0)
            gc.collect(2)
    finally:
        watch.uninstall()
    assert count(registry, 0) >= 1 and count(registry, 2) >= 1
    assert any("generation 2 garbage collection paused kcoord" in r.message for r in caplog.records)
    before = count(registry, 2)
    gc.collect(2)  # uninstalled: no longer observed
    assert count(registry, 2) == before and watch._callback not in gc.callbacks
