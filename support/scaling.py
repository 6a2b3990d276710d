"""What the KIP-848 scaling scenarios share: the scaling phase itself (:func:`run_scaling`), a
steady producer, members stopped in parallel, and what kcoord and the group say before and after.

support/autoscaling.py (offset commits) and bench/eos_scaling.py (transactions) both scale a group
of Java consumer-protocol members (support/java.py) out and in while the producer here keeps
numbered records flowing, once per ``group.consumer.offset.commit.fencing`` mode; each then reads
its own members' events.
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

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


def owned(peer: Any) -> set[str]:
    """The member's partitions as its rebalance callbacks left them: assigned minus revoked/lost."""
    have: set[str] = set()
    for e in list(peer.events):
        if e.get("event") == "assigned":
            have |= set(e["partitions"])
        elif e.get("event") in ("revoked", "lost"):
            have -= set(e["partitions"])
    return have


def max_committed(peers: list[Any], event: str) -> dict[str, int]:
    """The highest offset of each partition in the members' ``event`` events (their ``offsets``)."""
    out: dict[str, int] = {}
    for peer in peers:
        for e in list(peer.events):
            if e.get("event") == event:
                for tp, off in e["offsets"].items():
                    if off > out.get(tp, -1):
                        out[tp] = off
    return out


class ScalingConfig(Protocol):
    """The fields of a scenario's config that the scaling phase reads."""

    members: int  # the group's size between scale-outs
    extra: int  # started at each scale-out, stopped at each scale-in
    seconds: float  # a scale step every `period`, out and in alternately
    period: float
    partitions: int  # of the topic the producer writes and the members read
    rate: float  # records produced per second
    seed: int  # which members a random scale-in stops
    drain_timeout: float  # after the phase: until every produced record is committed
    settle_timeout: float  # the first members owning every partition


class ScalingResult(Protocol):
    """The fields of a scenario's result that the scaling phase fills in."""

    mode: str
    members_started: int
    scale_steps: list[str]
    produced: int
    drained: bool
    loadavg: list[str]
    events_path: str
    peer_errors: list[str]
    seconds: float


@dataclass
class Phase:
    """What the scenario reads after :func:`run_scaling`: every member started (in order, their
    events complete), the records produced (key -> partition), the scaling phase's wall-clock
    window (ms since the epoch) and kcoord's /metrics before and after."""

    peers: list[Any]
    sent: dict[int, int]
    window_ms: tuple[float, float]
    before: dict[Any, float]
    after: dict[Any, float]

    def metric_delta(self, name: str, api: str, label: str) -> dict[str, float]:
        return metric_delta(self.before, self.after, name, api, label)


def run_scaling(result: ScalingResult, cfg: ScalingConfig, *, bootstrap: str, topic: str,
                peer: str, peer_args: Callable[[str], list[str]], committed_event: str,
                stop: str = "random", kill: int = 0, metrics_url: str | None, log_dir: Path,
                say: Callable[[str], None]) -> Phase:  # fmt: skip
    """The scaling phase against kcoord at ``bootstrap``, filling in ``result``'s common fields.

    Starts ``cfg.members`` Java ``peer`` members (``peer_args(client id)``) and waits until they own
    every partition of ``topic``; then, while a :class:`Producer` writes ``cfg.rate`` records a second
    to ``topic``, every ``cfg.period`` for ``cfg.seconds`` starts ``cfg.extra`` members or stops
    ``cfg.extra`` of them (``stop``: random, seeded with ``cfg.seed``, or oldest/newest; the first
    ``kill`` of them get SIGKILL); stops the producer and waits until the members' ``committed_event``
    events cover every produced record; stops every member and writes their events to
    ``log_dir/events-<mode>.jsonl``.
    """
    from support.java import JavaPeer

    rng = random.Random(cfg.seed)
    every = {f"{topic}-{p}" for p in range(cfg.partitions)}
    before = scrape(metrics_url)
    started_at = time.monotonic()
    live: list[Any] = []
    all_peers: list[Any] = []
    stoppers: list[threading.Thread] = []
    producer: Producer | None = None
    window_ms: tuple[float, float] = (0.0, 0.0)

    def start_member() -> Any:
        name = f"m{len(all_peers):02d}"
        member = JavaPeer(peer, peer_args(name), log_dir=log_dir, name=name)
        live.append(member)
        all_peers.append(member)
        return member

    try:
        for _ in range(cfg.members):
            start_member()
        deadline = time.monotonic() + cfg.settle_timeout
        while set().union(*(owned(p) for p in live)) != every:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{cfg.members} members did not own all {cfg.partitions} partitions in "
                                   f"{cfg.settle_timeout}s: {[sorted(owned(p)) for p in live]}")  # fmt: skip
            time.sleep(0.2)
        say(
            f"{cfg.members} members own all {cfg.partitions} partitions after {time.monotonic() - started_at:.1f}s"
        )
        producer = Producer(bootstrap, topic, cfg.partitions, cfg.rate).start()
        t0 = time.monotonic()
        t0_ms = time.time() * 1000
        for k in range(1, int(cfg.seconds // cfg.period) + 1):
            time.sleep(max(0.0, t0 + k * cfg.period - time.monotonic()))
            if k % 2 == 1:
                for _ in range(cfg.extra):
                    start_member()
                step = f"t={time.monotonic() - t0:.1f}s: +{cfg.extra} -> {len(live)}"
            else:
                if stop == "oldest":
                    victims = live[: cfg.extra]
                elif stop == "newest":
                    victims = live[-cfg.extra :]
                else:
                    victims = rng.sample(live, cfg.extra)
                for v in victims:
                    live.remove(v)
                stoppers += stop_peers(victims, kill)
                step = f"t={time.monotonic() - t0:.1f}s: -{cfg.extra} ({', '.join(v.name for v in victims)}) -> {len(live)}"
            result.scale_steps.append(step)
            say(step)
        time.sleep(max(0.0, t0 + cfg.seconds - time.monotonic()))
        window_ms = (t0_ms, time.time() * 1000)
        producer.stop()
        produced = producer.per_partition()
        result.produced = len(producer.sent)
        if producer.errors or producer.acked != result.produced:
            result.peer_errors.append(
                f"producer: {producer.acked} acked of {result.produced}; {producer.errors[:3]}"
            )
        say(f"produced {result.produced} records; draining")
        deadline = time.monotonic() + cfg.drain_timeout
        while True:
            committed = max_committed(all_peers, committed_event)
            if all(committed.get(f"{topic}-{p}", 0) >= n for p, n in produced.items()):
                result.drained = True
                break
            if time.monotonic() > deadline:
                break
            time.sleep(0.5)
        say(
            f"drained={result.drained} after {time.monotonic() - t0 - cfg.seconds:.1f}s; stopping the members"
        )
        stoppers += stop_peers(live, 0)
        live.clear()
        for t in stoppers:
            t.join(30)
    finally:
        if producer is not None and producer._thread.is_alive():
            producer.stop()
        for member in all_peers:
            member.stop()
    result.loadavg.append(loadavg())
    result.members_started = len(all_peers)
    events_path = log_dir / f"events-{result.mode}.jsonl"
    with open(events_path, "w") as out:
        for member in all_peers:
            for e in member.events:
                out.write(json.dumps({"member": member.name, **e}) + "\n")
    result.events_path = str(events_path)
    result.seconds = round(time.monotonic() - started_at, 1)
    after = scrape(metrics_url)
    return Phase(all_peers, producer.sent if producer else {}, window_ms, before, after)
