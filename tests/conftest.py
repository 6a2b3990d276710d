"""Shared pytest setup: fixtures for real processes live in tests/support."""

from __future__ import annotations
