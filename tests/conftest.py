"""Shared pytest setup: fixtures for real processes (tansu and Kafka brokers, Java peers) live in
tests/support; the run ends with a table by part (tests/support/run_summary.py)."""

from __future__ import annotations

import os

import pytest

from tests.support.fixtures import *  # noqa: F403
from tests.support.run_summary import RunSummary
from tests.support.spark import spark  # noqa: F401  (one SparkSession per test session)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(RunSummary(), "kcoord-run-summary")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``@pytest.mark.only_on("kafka")`` on a case of a test that runs on every upstream: the default
    run shares such cases (e.g. fault timings) among the upstreams to keep the suite's time; with
    ``KCOORD_TEST_EVERY_CASE=1`` every case runs on every upstream."""
    if os.environ.get("KCOORD_TEST_EVERY_CASE") == "1":
        return
    keep, drop = [], []
    for item in items:
        marker = item.get_closest_marker("only_on")
        callspec = getattr(item, "callspec", None)
        upstream = callspec.params.get("upstream") if callspec is not None else None
        if marker is not None and upstream is not None and upstream not in marker.args:
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
