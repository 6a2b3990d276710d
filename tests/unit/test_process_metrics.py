"""The process_* series Prometheus's client libraries export, from this process's /proc."""

from __future__ import annotations

import os
import resource
import sys
import time

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from kcoord.coordinator.ops.metrics import Metrics

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")


def process_samples(metrics: Metrics) -> dict[str, float]:
    text = generate_latest(metrics.registry).decode()
    return {
        s.name: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("process_")
    }


def test_process_metrics_describe_this_process() -> None:
    metrics = Metrics()
    spent = os.times()
    got = process_samples(metrics)
    assert set(got) == {
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_virtual_memory_bytes",
        "process_open_fds",
        "process_max_fds",
        "process_start_time_seconds",
    }
    # /proc's clock ticks are coarser than os.times(): within a few ticks of what the kernel says.
    assert abs(got["process_cpu_seconds_total"] - (spent.user + spent.system)) < 0.1
    assert got["process_max_fds"] == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert 0 < got["process_resident_memory_bytes"] < got["process_virtual_memory_bytes"]
    assert time.time() - 24 * 3600 < got["process_start_time_seconds"] <= time.time()


def test_open_fds_follow_the_files_opened() -> None:
    metrics = Metrics()
    before = process_samples(metrics)["process_open_fds"]
    pipes = [os.pipe() for _ in range(5)]
    try:
        assert process_samples(metrics)["process_open_fds"] == before + 10
    finally:
        for read_end, write_end in pipes:
            os.close(read_end)
            os.close(write_end)
    assert process_samples(metrics)["process_open_fds"] == before
