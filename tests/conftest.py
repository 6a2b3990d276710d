"""Shared pytest setup: fixtures for real processes (tansu and Kafka brokers, Java peers) live in
tests/support; the run ends with a table by part (tests/support/run_summary.py)."""

from __future__ import annotations

import pytest

from tests.support.fixtures import *  # noqa: F403
from tests.support.run_summary import RunSummary
from tests.support.spark import spark  # noqa: F401  (one SparkSession per test session)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(RunSummary(), "kcoord-run-summary")
