"""The internal topic deleted under groups that keep committing: how long until kcoord serves them again.

Shared by the integration test (``tests/integration/test_topic_loss_heal.py``) and the benchmark
(``bench/topic_loss_heal.py``): both start kcoord (:class:`support.kcoord_process.KcoordProcess`)
in front of an upstream broker, run :func:`run_scenario`, and read the :class:`HealReport`.

Every group is one client on a connection of its own that commits offset 1, 2, 3, ... of one
partition (OffsetCommit v8, generation -1, as a member-less client does) and, after each
acknowledged commit, reads it back (OffsetFetch v6). Once every group committed at least once, the
internal topic is deleted upstream (DeleteTopics through kafka-python's admin client); kcoord must
notice, re-create the topic and serve again. A group is *served again* at its first commit after
the delete that was acknowledged and read back as written. The clients keep committing for
``settle`` seconds after the last group is served again, so acknowledged commits made after the
heal exist; their offsets are what the caller checks after a kill -9 and a restart.

A read that answers NONE with another offset than the one the group just had acknowledged is an
inconsistent read (stale state served); the report lists them.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from kafka.admin import KafkaAdminClient

from kcoord.client import Connection
from kcoord.client.errors import ConnectionLost, RequestTimedOut
from kcoord.protocol import messages as m
from kcoord.protocol.errors import ErrorCode

COMMIT_VERSION = 8
FETCH_VERSION = 6


@dataclass
class GroupCommits:
    """One group's commits, as its client saw them."""

    group: str
    attempted: int = 0  # the highest offset sent in a commit (acknowledged or not)
    acknowledged: int = -1  # the highest offset whose commit was answered NONE
    served_again_at: float | None = (
        None  # monotonic time of the first commit acknowledged and read back after the delete
    )
    errors_after_delete: int = 0  # commits answered with an error after the delete
    inconsistent_reads: list[tuple[int, int]] = field(default_factory=list)  # (acknowledged, read)


@dataclass
class HealReport:
    """What a run measured. Times are seconds since the DeleteTopics answer."""

    groups: list[GroupCommits]
    deleted_at: float
    heal_seconds: float | None  # when the last group was served again; None if one never was
    timed_out: list[str]  # groups not served again within the scenario's bound

    def served_within(self) -> list[float]:
        return sorted(
            g.served_again_at - self.deleted_at for g in self.groups if g.served_again_at is not None
        )

    def inconsistent_reads(self) -> dict[str, list[tuple[int, int]]]:
        return {g.group: g.inconsistent_reads for g in self.groups if g.inconsistent_reads}


def commit_request(group: str, topic: str, offset: int, partitions: int) -> m.OffsetCommitRequest:
    """``offset`` for each of the topic's first ``partitions`` partitions: one record each in the log."""
    R = m.OffsetCommitRequest
    return R(
        group_id=group, generation_id_or_member_epoch=-1, member_id="",
        topics=[R.OffsetCommitRequestTopic(name=topic, partitions=[
            R.OffsetCommitRequestPartition(partition_index=p, committed_offset=offset) for p in range(partitions)
        ])],
    )  # fmt: skip


def fetch_request(group: str, topic: str) -> m.OffsetFetchRequest:
    R = m.OffsetFetchRequest
    return R(group_id=group, topics=[R.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])])


def read_offset(response: m.OffsetFetchResponse) -> tuple[int, int]:
    """(error code, committed offset) of partition 0; a top-level error gives (that error, -1)."""
    if response.error_code:
        return int(response.error_code), -1
    part = response.topics[0].partitions[0]
    return int(part.error_code), int(part.committed_offset)


class _Clients:
    """The groups' commit loops, and the moment of the delete they measure from."""

    def __init__(
        self, addresses: list[tuple[str, int]], topic: str, partitions: int, groups: list[str], pause: float
    ) -> None:
        self.addresses = addresses
        self.partitions = partitions
        self.topic = topic
        self.pause = pause
        self.groups = [GroupCommits(g) for g in groups]
        self.deleted_at: float | None = None
        self.stopping = False

    async def run(self, index: int, state: GroupCommits) -> None:
        """Commit in a loop on a connection to the group's coordinator (FindCoordinator, asked again
        after NOT_COORDINATOR or a lost connection), as a client does."""
        bootstrap = self.addresses[index % len(self.addresses)]
        conn: Connection | None = None
        while not self.stopping:
            try:
                if conn is None or conn.closed:
                    conn = await coordinator_connection(
                        bootstrap, state.group, cluster=len(self.addresses) > 1
                    )
                if await self._commit_once(conn, state) == ErrorCode.NOT_COORDINATOR:
                    conn.close()
                    conn = None
            except (ConnectionLost, RequestTimedOut, OSError, TimeoutError):
                if conn is not None:
                    conn.close()
                conn = None
            await asyncio.sleep(self.pause)
        if conn is not None:
            conn.close()

    async def _commit_once(self, conn: Connection, state: GroupCommits) -> int:
        """One commit, read back when acknowledged; returns the commit's error code."""
        offset = state.attempted + 1
        state.attempted = offset
        since_delete = self.deleted_at  # the delete may happen while the commit is in flight
        response = await conn.request(
            commit_request(
                state.group, self.topic, offset, 1 if state.errors_after_delete else self.partitions
            ),
            COMMIT_VERSION,
        )
        error = max((int(p.error_code) for p in response.topics[0].partitions), key=abs)
        if error != ErrorCode.NONE:
            if since_delete is not None:
                state.errors_after_delete += 1
            return error
        state.acknowledged = offset
        read = read_offset(await conn.request(fetch_request(state.group, self.topic), FETCH_VERSION))
        if read[0] == ErrorCode.NONE and read[1] != state.acknowledged:
            state.inconsistent_reads.append((state.acknowledged, read[1]))
        elif read == (ErrorCode.NONE, offset) and since_delete is not None and state.served_again_at is None:
            state.served_again_at = time.monotonic()
        return error


async def coordinator_connection(bootstrap: tuple[str, int], group: str, *, cluster: bool) -> Connection:
    """A connection to ``group``'s coordinator: ``bootstrap`` itself, or in a cluster the node
    FindCoordinator names."""
    if not cluster:
        return await Connection.open(bootstrap, request_timeout=10.0)
    finder = await Connection.open(bootstrap, request_timeout=10.0)
    try:
        found = await finder.request(m.FindCoordinatorRequest(key=group, key_type=0), 3)
    finally:
        finder.close()
    if found.error_code != ErrorCode.NONE:
        raise OSError(f"FindCoordinator: error {found.error_code}")
    return await Connection.open((found.host, found.port), request_timeout=10.0)


def addresses(bootstrap: str) -> list[tuple[str, int]]:
    """``host:port,host:port`` (a cluster's nodes: group i's client talks to node i mod n)."""
    out = []
    for address in bootstrap.split(","):
        host, port = address.rsplit(":", 1)
        out.append((host, int(port)))
    return out


def delete_topic(bootstrap: str, topic: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.delete_topics([topic])
    finally:
        admin.close()


async def run_scenario(
    kcoord: str,  # host:port, or a cluster's host:port,host:port,...
    upstream: str,
    internal_topic: str,
    data_topic: str,
    groups: list[str],
    *,
    bound: float,
    settle: float = 1.0,
    pause: float = 0.05,
    warmup: float = 0.0,
    partitions: int = 1,
) -> HealReport:
    """Commit from every group, delete ``internal_topic`` upstream, and wait up to ``bound`` seconds
    for every group to be served again (module docstring); then ``settle`` more seconds of commits.
    ``warmup``: seconds of commits before the delete, after every group's first. ``partitions``:
    each commit names that many partitions of ``data_topic`` (the same offset for each) until the
    group's first error after the delete, then partition 0 only (the one read back): big batches
    go into the deleted topic, small ones come after kcoord noticed (on tansu the deleted topic's
    batches come back in the re-created one: the module docstring of kcoord/storage/loader.py)."""
    clients = _Clients(addresses(kcoord), data_topic, partitions, groups, pause)
    tasks = [asyncio.ensure_future(clients.run(i, state)) for i, state in enumerate(clients.groups)]
    try:
        deadline = time.monotonic() + 30
        while any(g.acknowledged < 1 for g in clients.groups):
            if time.monotonic() > deadline:
                raise AssertionError(
                    "not every group had a commit acknowledged within 30 s before the delete"
                )
            await asyncio.sleep(0.05)
        await asyncio.sleep(warmup)  # a longer history in the log before it goes
        await asyncio.to_thread(delete_topic, upstream, internal_topic)
        deleted_at = clients.deleted_at = time.monotonic()
        while (
            any(g.served_again_at is None for g in clients.groups) and time.monotonic() - deleted_at < bound
        ):
            await asyncio.sleep(0.05)
        served = [g.served_again_at for g in clients.groups if g.served_again_at is not None]
        timed_out = [g.group for g in clients.groups if g.served_again_at is None]
        heal = None if timed_out else max(served) - deleted_at
        await asyncio.sleep(settle)
    finally:
        clients.stopping = True
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
    return HealReport(clients.groups, deleted_at, heal, timed_out)


async def read_back(kcoord: str, data_topic: str, groups: list[str]) -> dict[str, tuple[int, int]]:
    """Every group's committed offset as its coordinator answers it now (retrying while a shard
    loads or the cluster is still handing shards out)."""
    nodes = addresses(kcoord)
    out: dict[str, tuple[int, int]] = {}
    for group in groups:
        deadline = time.monotonic() + 20
        while True:
            conn = await coordinator_connection(nodes[0], group, cluster=len(nodes) > 1)
            try:
                read = read_offset(await conn.request(fetch_request(group, data_topic), FETCH_VERSION))
            finally:
                conn.close()
            retriable = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR)
            if read[0] not in retriable or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        out[group] = read
    return out


def count_log_events(log_path: Path, event: str) -> int:
    """How many ``event=...`` lines kcoord's log holds (``shard.loaded``, ``shard.lost``)."""
    pattern = re.compile(rf"\bevent={re.escape(event)}\b")
    return sum(1 for line in log_path.read_text(errors="replace").splitlines() if pattern.search(line))
