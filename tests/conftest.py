"""Shared pytest setup: fixtures for real processes (tansu broker, Java peers) live in tests/support."""

from __future__ import annotations

from tests.support.fixtures import *  # noqa: F403
from tests.support.spark import spark  # noqa: E402, F401  (one SparkSession per test session)
