"""The machinery KIP-848 members share: pipelined connections, the heartbeat wheel, commit loops.

Unlike the classic protocol there are no lanes: a ConsumerGroupHeartbeat never parks (a join is
answered at once, with or without partitions). By default (``connections=None``) each member has
one connection of its own, as a Java consumer has to its coordinator, for its joins,
acknowledgements, regular heartbeats, commits and its leave; the connections are opened in
batches before the ramp (:meth:`ConsumerRuntime.open_member_connections`). ``connections=C`` is
the old shape: the members share C pipelined connections (member ``i`` on connection ``i % C``),
which lets a server that pipelines look better than one that, like Kafka, processes one request
per connection at a time. When each member heartbeats:

- **regularly** from the wheel (:class:`~.runtime.HeartbeatWheel`), once per interval — the
  interval the coordinator returned in ``heartbeat_interval_ms`` unless the scenario set one;
- **at once** when an answer asks for it (an assignment to acknowledge, a rejoin after being
  fenced), as the Java consumer does; after a back-off for a coordinator error;
- never twice at a time: a member has at most one heartbeat in flight (a regular heartbeat due
  while one is in flight is skipped and counted).

A heartbeat that changes nothing is encoded once per member epoch and only its correlation id
is patched (:func:`kcoord.client.prepare`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Iterable, Sequence
from typing import Any

from kcoord.client import Connection, prepare
from kcoord.protocol import messages as m
from kcoord.protocol.messages import ApiKey

from .conn import Stats, open_connection
from .consumer_member import COMMIT_VERSION, DESCRIBE_VERSION, HEARTBEAT_VERSION, ConsumerMember, CState, Step
from .runtime import HeartbeatWheel, SharedConnections, check_descriptor_budget, close_all, open_in_batches

log = logging.getLogger("loadgen.consumer")

HB = m.ConsumerGroupHeartbeatRequest


class ConsumerRuntime:
    """Connections (one per member, or C shared), the wheel, immediate heartbeats and commit loops for one run."""

    def __init__(
        self,
        coordinator: tuple[str, int],
        stats: Stats,
        connections: int | None = None,
        client_id: str = "kcoord-loadgen",
        backoff_s: float = 0.1,
        group_coordinators: dict[str, tuple[str, int]] | None = None,
    ) -> None:
        self.host, self.port = coordinator
        # Per-member shape: a member whose group's coordinator is elsewhere (the workers of
        # `kcoord serve --workers N`, a kcoord cluster) opens its connection there.
        self.group_coordinators = group_coordinators or {}
        self.stats = stats
        self.per_member = connections is None
        self.client_id = client_id
        self.backoff_s = backoff_s
        self.shared = SharedConnections(
            0 if connections is None else max(1, connections), self.group_coordinators, coordinator
        )
        self.members: list[ConsumerMember] = []
        self.wheel: HeartbeatWheel | None = None
        self.committing = False
        self.failures: list[str] = []
        self.first_interval: asyncio.Future[int] | None = None
        # counters (read before and after a window)
        self.sent = 0
        self.sent_now = 0  # acknowledgements and rejoins sent at once
        self.skipped = 0  # regular heartbeats due while one was in flight
        self.no_answer = 0  # heartbeats whose connection failed
        self.with_assignment = 0  # answers that carried an assignment
        self.commit_idle = 0  # commit attempts of a member that owned nothing or was not a member
        self._wheel_task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> ConsumerRuntime:
        self._loop = asyncio.get_running_loop()
        self.first_interval = self._loop.create_future()
        await self.shared.open(self.stats, self.client_id, "cg")
        return self

    async def open_member_connections(self) -> None:
        """Per-member shape: open every attached member's connection now, in batches, before the
        ramp (nothing is timed yet). A no-op in the shared shape."""
        if not self.per_member:
            return
        check_descriptor_budget(len(self.members))
        todo = [mb for mb in self.members if mb.conn is None or mb.conn.closed]
        conns = await open_in_batches(
            len(todo),
            lambda i: open_connection(
                *self.coordinator_of(todo[i].group_id),
                self.stats,
                self.client_id,
                name=f"cgmember{todo[i].index}",
            ),
        )
        for mb, conn in zip(todo, conns, strict=True):
            mb.conn = conn

    def coordinator_of(self, group_id: str) -> tuple[str, int]:
        return self.group_coordinators.get(group_id, (self.host, self.port))

    def connections(self) -> list[Connection]:
        """Every connection the members use (each once)."""
        if not self.per_member:
            return self.shared.all()
        return [mb.conn for mb in self.members if mb.conn is not None]

    def start_wheel(self, interval_s: float) -> None:
        self.wheel = HeartbeatWheel(interval_s, self._regular)
        for member in self.members:
            self.wheel.add(member)  # type: ignore[arg-type]
        assert self._loop is not None
        self._wheel_task = self._loop.create_task(self.wheel.run())

    async def close(self, leave: bool = True) -> None:
        self.committing = False
        if self._wheel_task is not None:
            self._wheel_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._wheel_task
        if leave:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.leave_all(), 30.0)
        await close_all(self.connections())

    # -- members --------------------------------------------------------------------------------------
    def attach(self, member: ConsumerMember) -> ConsumerMember:
        """Take the member in; in the per-member shape its connection is opened by
        :meth:`open_member_connections`, before the member is admitted."""
        member.conn = None if self.per_member else self.shared.for_member(member.group_id, member.index)
        member.hb_callback = functools.partial(self._on_heartbeat, member)
        member.commit_callback = functools.partial(self._on_commit, member)
        member.admitted = False
        self.members.append(member)
        if self.wheel is not None:
            self.wheel.add(member)  # type: ignore[arg-type]
        return member

    def join(self, members: Iterable[ConsumerMember]) -> None:
        """Admit members: each sends its join (epoch 0, full heartbeat) now."""
        for member in members:
            member.admitted = True
            self.send(member)

    async def leave_all(self) -> None:
        """Every member in a group leaves (epoch -1 / -2), so the server does not expire them later."""
        calls = []
        for member in self.members:
            request = member.leave_request()
            member.stop()
            if request is not None and member.conn is not None and not member.conn.closed:
                calls.append(member.conn.call(request, HEARTBEAT_VERSION))
        await asyncio.gather(*calls, return_exceptions=True)

    # -- heartbeats -----------------------------------------------------------------------------------
    def _regular(self, member: ConsumerMember) -> None:
        if not member.admitted or not member.active:
            return
        if member.hb_inflight:
            self.skipped += 1
            return
        self.send(member)

    def send(self, member: ConsumerMember) -> None:
        if not member.active or member.hb_inflight:
            return
        conn = member.conn
        if conn is None or conn.closed:
            return
        member.hb_inflight = True
        self.sent += 1
        if member.steady:
            frame = member.hb_frame
            if frame is None or member.hb_frame_epoch != member.epoch:
                frame = member.hb_frame = prepare(
                    member.heartbeat_request(), HEARTBEAT_VERSION, self.client_id
                )
                member.hb_frame_epoch = member.epoch
            conn.send_prepared(frame, HB, HEARTBEAT_VERSION, member.hb_callback)
        else:
            conn.call_cb(member.heartbeat_request(), HEARTBEAT_VERSION, member.hb_callback)

    def _on_heartbeat(self, member: ConsumerMember, resp: Any) -> None:
        member.hb_inflight = False
        if resp is None:
            self.no_answer += 1
            member.on_failure()
            return
        ec = resp.error_code
        if ec:
            self.stats.error(ApiKey.CONSUMER_GROUP_HEARTBEAT, ec)
        elif resp.assignment is not None:
            self.with_assignment += 1
        step = member.on_heartbeat(resp)
        fut = self.first_interval
        if fut is not None and not fut.done() and member.heartbeat_interval_ms:
            fut.set_result(member.heartbeat_interval_ms)
        if step is Step.NOW:
            self.sent_now += 1
            self.send(member)
        elif step is Step.BACKOFF:
            assert self._loop is not None
            self._loop.call_later(self.backoff_s, self.send, member)
        elif step is Step.STOP and member.error:
            self.failures.append(member.error)
            if fut is not None and not fut.done():
                fut.set_exception(RuntimeError(member.error))

    # -- commits --------------------------------------------------------------------------------------
    def start_commits(self, members: Sequence[ConsumerMember]) -> None:
        """Closed loop: each member keeps one OffsetCommit v10 in flight until stop_commits()."""
        self.committing = True
        for member in members:
            member.committer = True
            if not member.commit_inflight:
                self._send_commit(member)

    def stop_commits(self) -> None:
        self.committing = False

    def _send_commit(self, member: ConsumerMember) -> None:
        if (
            not (self.committing and member.committer and member.active)
            or member.conn is None
            or member.conn.closed
        ):
            return
        request = member.commit_request(member.commit_offset + 1)
        if request is None:  # owns nothing (yet): look again a little later
            self.commit_idle += 1
            assert self._loop is not None
            self._loop.call_later(self.backoff_s, self._send_commit, member)
            return
        member.commit_offset += 1
        member.commit_inflight = True
        member.conn.call_cb(request, COMMIT_VERSION, member.commit_callback)

    def _on_commit(self, member: ConsumerMember, resp: Any) -> None:
        member.commit_inflight = False
        if resp is None:
            return
        for ec in set(member.commit_errors(resp)):
            self.stats.error(ApiKey.OFFSET_COMMIT, ec)
        self._send_commit(member)

    # -- the server's view ----------------------------------------------------------------------------
    async def describe(self, group_ids: Sequence[str], batch: int = 20) -> dict[str, Any]:
        """ConsumerGroupDescribe v0 of ``group_ids``: group id -> DescribedGroup."""
        calls = []
        # An admin tool's request: any open connection to the groups' coordinator will do.
        conns: dict[tuple[str, int], list[Connection]] = {}
        if self.per_member:
            for mb in self.members:
                if mb.conn is not None and not mb.conn.closed:
                    conns.setdefault(self.coordinator_of(mb.group_id), []).append(mb.conn)
        else:
            for address, shared in self.shared.by_address.items():
                conns[address] = [c for c in shared if not c.closed]
        by_coordinator: dict[tuple[str, int], list[str]] = {}
        for group_id in group_ids:
            by_coordinator.setdefault(self.coordinator_of(group_id), []).append(group_id)
        for address, ids in by_coordinator.items():
            open_conns = conns.get(address, [])
            for i in range(0, len(ids), batch):
                conn = open_conns[(i // batch) % len(open_conns)]
                req = m.ConsumerGroupDescribeRequest(
                    group_ids=ids[i : i + batch], include_authorized_operations=False
                )
                calls.append(conn.call(req, DESCRIBE_VERSION))
        out: dict[str, Any] = {}
        for resp in await asyncio.gather(*calls):
            for g in resp.groups:
                out[g.group_id] = g
        return out

    def counters(self) -> dict[str, int]:
        return {
            "sent": self.sent,
            "sent_now": self.sent_now,
            "skipped": self.skipped,
            "no_answer": self.no_answer,
            "with_assignment": self.with_assignment,
            "commit_idle": self.commit_idle,
            "fenced": sum(mb.fenced for mb in self.members),
            "assignment_changes": sum(mb.assignments for mb in self.members),
            "partitions_revoked": sum(mb.partitions_revoked for mb in self.members),
            "partitions_assigned": sum(mb.partitions_assigned for mb in self.members),
            "joins": sum(mb.joins for mb in self.members),
            "stopped": sum(1 for mb in self.members if mb.state is CState.STOPPED),
        }
