"""The upstream's state for readiness, and its log: one line per change, never one per failure."""

from __future__ import annotations

import logging

import pytest

from kcoord.coordinator.ops.upstream_health import ANSWERING, FAILING, SILENT, UpstreamHealth


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage().split(":")[0] for r in caplog.records if r.name == "kcoord.upstream"]


def test_an_outage_is_one_line_each_way_however_many_attempts_fail(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    clock = Clock()
    health = UpstreamHealth(5.0, now=clock)
    assert not health.is_answering()  # no answer yet: not ready
    health.answered()
    assert health.is_answering() and not health.suspect and lines(caplog) == []
    for _ in range(4):  # refused, every second
        clock.now += 1.0
        health.failed("[Errno 111] Connection refused")
        assert health.is_answering()  # still within the timeout: ready
        assert health.suspect  # client connections' failures go to DEBUG now
    assert health.state == FAILING and lines(caplog) == ["upstream failing"]
    clock.now += 1.5
    health.failed("[Errno 111] Connection refused")
    assert not health.is_answering() and health.state == SILENT
    for _ in range(20):
        clock.now += 1.0
        health.failed("[Errno 111] Connection refused")
        health.update()
    assert lines(caplog) == ["upstream failing", "upstream silent"]
    health.answered()
    assert health.state == ANSWERING and health.is_answering() and not health.suspect
    assert lines(caplog) == [
        "upstream failing",
        "upstream silent",
        "upstream answers again after 25 failed attempts; ready once every owned shard is loaded",
    ]


def test_a_paused_upstream_goes_silent_without_any_failure(caplog: pytest.LogCaptureFixture) -> None:
    """SIGSTOP: the connection stays open and the request waits; only the silence tells."""
    caplog.set_level(logging.INFO)
    clock = Clock()
    health = UpstreamHealth(2.0, now=clock)
    health.answered()
    clock.now += 1.9
    assert health.is_answering() and not health.update()
    clock.now += 0.2
    assert not health.is_answering()
    assert health.update() and not health.update()  # logged once
    assert health.describe()["state"] == SILENT
    assert "requests unanswered" in caplog.records[-1].getMessage()


def test_start_up_gets_the_timeout_before_a_silent_line() -> None:
    clock = Clock()
    health = UpstreamHealth(5.0, now=clock)
    clock.now += 4.0
    assert not health.update() and health.state == ANSWERING  # no line while kcoord connects
    clock.now += 1.5
    assert health.update() and health.state == SILENT
