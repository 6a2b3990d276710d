"""The test harness formats Kafka's log dir with any cluster id `kafka-storage.sh random-uuid` can print."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.kafka_broker import KafkaBroker
from tests.support.fixtures import UPSTREAMS


@pytest.mark.skipif("kafka" not in UPSTREAMS, reason="KCOORD_TEST_UPSTREAMS leaves Apache Kafka out")
def test_a_cluster_id_that_starts_with_a_dash_formats(tmp_path: Path) -> None:
    # One random base64url id in 64 starts with "-"; passed as its own argument, argparse took it for an
    # option and the broker never started (three errors in one CI run).
    cluster_id = "-LIJGpbuSD-pZqHKF_2a_w"
    broker = KafkaBroker(tmp_path, cluster_id=cluster_id)
    broker._pick_ports()
    broker._prepare()
    meta = (broker.data_dir / "meta.properties").read_text()
    assert f"cluster.id={cluster_id}\n" in meta
