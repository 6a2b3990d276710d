"""Shared pytest setup: fixtures for real processes (tansu broker, Java peers) live in tests/support."""

from __future__ import annotations

from tests.support.fixtures import *  # noqa: F403
