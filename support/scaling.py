"""What the KIP-848 scaling scenarios share: a steady producer, members stopped in parallel, and
what kcoord and the group say before and after.

support/autoscaling.py (offset commits) and bench/eos_scaling.py (transactions) both scale a group
of Java consumer-protocol members (support/java.py) out and in while the producer here keeps
numbered records flowing, once per ``group.consumer.offset.commit.fencing`` mode.
"""

from __future__ import annotations

import contextlib
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

MODES = ("strict", "revocation-epoch", "assignment-epoch")


def scrape(metrics_url: str | None) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of kcoord's /metrics: (name, sorted labels) -> value."""
    if not metrics_url:
        return {}
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(metrics_url, timeout=10) as resp:
        text = resp.read().decode()
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def metric_delta(
    before: dict[Any, float], after: dict[Any, float], name: str, api: str, label: str
) -> dict[str, float]:
    """How much each ``label`` of metric ``name`` (for ``api``) grew between two scrapes; growth only."""
    out: dict[str, float] = {}
    for (n, labels), value in after.items():
        d = dict(labels)
        if n == name and d.get("api") == api:
            diff = value - before.get((n, labels), 0.0)
            if diff:
                out[d[label]] = diff
    return out


class Producer:
    """Numbered records (key = decimal n, partition = n mod partitions) at a steady rate, on a thread."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float) -> None:
        from kafka import KafkaProducer

        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
        self.sent: dict[int, int] = {}  # key -> partition
        self.acked = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="autoscaling-producer", daemon=True)

    def start(self) -> Producer:
        self._thread.start()
        return self

    def _ack(self, _md: Any) -> None:
        self.acked += 1

    def _err(self, exc: BaseException) -> None:
        self.errors.append(repr(exc))

    def _run(self) -> None:
        n, started = 0, time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - started) * self.rate)
            while n < due:
                p = n % self.partitions
                fut = self.producer.send(self.topic, key=str(n).encode(), value=b"v%d" % n, partition=p)
                fut.add_callback(self._ack).add_errback(self._err)
                self.sent[n] = p
                n += 1
            self._stop.wait(0.02)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.producer.flush(60)
        self.producer.close()

    def per_partition(self) -> Counter[int]:
        return Counter(self.sent.values())


def stop_peers(peers: list[Any], kill: int) -> list[threading.Thread]:
    """Stop these members in parallel (graceful close with a leave heartbeat; the first ``kill`` get
    SIGKILL); returns the threads doing it."""
    threads = []
    for i, peer in enumerate(peers):
        if i < kill:
            peer.process.kill()
        t = threading.Thread(target=peer.stop, name=f"stop-{peer.name}", daemon=True)
        t.start()
        threads.append(t)
    return threads


def loadavg() -> str:
    """/proc/loadavg: how busy the machine was with other work."""
    with contextlib.suppress(OSError):
        return Path("/proc/loadavg").read_text().strip()
    return "?"


def group_offsets(bootstrap: str, group: str) -> dict[str, int]:
    """The group's committed offsets as kcoord serves them (OffsetFetch through kafka-python's admin)."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        fetched = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    return {f"{tp.topic}-{tp.partition}": om.offset for tp, om in fetched.items() if om.offset >= 0}


def commit_ms_percentiles(commit_ms: list[float]) -> tuple[float, float, float]:
    """(p50, p99, max) of the members' commit durations, rounded to 0.1 ms; zeros when there were none."""
    if not commit_ms:
        return 0.0, 0.0, 0.0
    ordered = sorted(commit_ms)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return round(ordered[len(ordered) // 2], 1), round(p99, 1), round(ordered[-1], 1)
