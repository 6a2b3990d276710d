"""One SparkSession for every test that needs one (pyspark is a test extra)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark", reason="pyspark is a test extra (pyproject.toml); not installed here")
    from kcoord.analytics.run import spark_session

    session = spark_session("local[2]", "kcoord-analytics-tests", shuffle_partitions=1)
    yield session
    session.stop()
