"""kcat (librdkafka 2.0, an older client than confluent-kafka's) through kcoord: metadata, produce,
consume, and a balanced consumer group (-G) that commits through kcoord; in front of tansu and of
Apache Kafka in turn."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import pytest

from support.kcoord_process import KcoordProcess
from support.workload import create_topic, unique
from tests.support.fixtures import Upstream
from tests.support.kcat import SKIP_REASON, kcat_path

pytestmark = [pytest.mark.integration, pytest.mark.skipif(kcat_path() is None, reason=SKIP_REASON)]


@pytest.fixture(scope="module")
def kcoord(upstream: Upstream) -> Iterator[KcoordProcess]:
    # No initial rebalance delay (Kafka's default waits 3 s for more members): each -G run is the
    # group's only member, so there is nobody to wait for.
    # An internal topic of its own: the upstream is shared by the whole session.
    args = (
        "--shards",
        "4",
        "--group-initial-rebalance-delay-ms",
        "0",
        "--internal-topic",
        unique("__kcoord_kcat"),
    )
    with KcoordProcess(*args, bootstrap=upstream.bootstrap) as proc:
        yield proc


def kcat(*args: str, stdin: str | None = None, timeout: float = 60) -> str:
    result = subprocess.run(
        [kcat_path() or "kcat", *args], input=stdin, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_kcat_metadata_produce_consume(kcoord: KcoordProcess) -> None:
    topic = unique("kcat")
    create_topic(kcoord.bootstrap, topic, 2)
    listing = kcat("-b", kcoord.bootstrap, "-L", "-t", topic)
    assert f"{kcoord.bootstrap}" in listing and "2 partitions" in listing
    kcat(
        "-b",
        kcoord.bootstrap,
        "-P",
        "-t",
        topic,
        "-p",
        "0",
        stdin="\n".join(f"line-{i}" for i in range(50)) + "\n",
    )
    out = kcat("-b", kcoord.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q")
    assert out.split() == [f"line-{i}" for i in range(50)]


def test_kcat_balanced_consumer_group_commits(kcoord: KcoordProcess) -> None:
    topic, group = unique("kcat-g"), unique("kcat-group")
    create_topic(kcoord.bootstrap, topic, 2)
    kcat(
        "-b",
        kcoord.bootstrap,
        "-P",
        "-t",
        topic,
        "-p",
        "0",
        stdin="\n".join(f"a{i}" for i in range(20)) + "\n",
    )
    kcat(
        "-b",
        kcoord.bootstrap,
        "-P",
        "-t",
        topic,
        "-p",
        "1",
        stdin="\n".join(f"b{i}" for i in range(20)) + "\n",
    )
    # -G joins a balanced group through kcoord; -e exits at the end of every assigned partition.
    # (-o would pin the start offset and ignore commits; auto.offset.reset only applies without one.)
    args = ["-b", kcoord.bootstrap, "-G", group, "-e", "-q", "-X", "auto.offset.reset=earliest",
            "-X", "enable.auto.commit=true", "-X", "auto.commit.interval.ms=100", topic]  # fmt: skip
    deadline = time.monotonic() + 60
    out = ""
    while time.monotonic() < deadline:
        out = kcat(*args)
        if len(out.split()) == 40:
            break
    assert sorted(out.split()) == sorted([f"a{i}" for i in range(20)] + [f"b{i}" for i in range(20)])
    # The offsets were committed through kcoord: a second run of the group reads nothing new.
    assert kcat(*args).split() == []
