"""The supervisor of ``kcoord serve --workers N``: starts the workers, replaces a dead one, stops all.

- Start: the embedded broker first when there is no ``bootstrap.server`` (the workers share it),
  then every worker at once; it serves once each worker reported that it serves. A worker that
  fails to start stops the whole start (exit 1), as one process that fails to start does.
- A worker that dies (kill -9, a crash, a fatal cluster error) is removed from the cluster's group
  at once (leave.py), so the live workers take its shards within a rebalance rather than after
  ``cluster.session.timeout.ms``; then a replacement with the same node id and port starts, at once
  if the dead one had run for a while, else after a doubling back-off (plan.py). One log line each.
- SIGTERM/SIGINT: every worker gets SIGTERM and stops as one process does (its shards drained, the
  group left); one that takes longer than STOP_TIMEOUT is killed. Then the embedded broker stops.
- The embedded broker exiting ends the supervisor (exit 3): the workers' state was in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import pickle
import signal
import sys
import time
from dataclasses import dataclass, field, replace

from kcoord.client import UpstreamSecurity
from kcoord.coordinator.net.embedded import EmbeddedBroker, describe_exit, free_port
from kcoord.coordinator.net.server import upstream_security
from kcoord.coordinator.ops.settings import Settings
from kcoord.coordinator.runtime.membership import group_id_for, instance_id_for

from .endpoint import SupervisorEndpoint
from .leave import remove_member
from .plan import RestartBackoff, worker_settings
from .worker import WorkerSpec

log = logging.getLogger("kcoord.workers")

START_TIMEOUT = 120.0  # seconds a worker may take to serve at start-up (storage, the cluster's group)
STOP_TIMEOUT = 15.0  # seconds a worker may take to stop on SIGTERM before it is killed
EMBEDDED_STOP_TIMEOUT = 1.0  # seconds the embedded broker gets to exit on SIGTERM once the workers stopped
EXIT_FATAL = 3  # as one process: the upstream (embedded broker) is gone


@dataclass
class Worker:
    """One worker slot: its settings stay; its process is replaced when it dies."""

    index: int
    settings: Settings
    backoff: RestartBackoff = field(default_factory=RestartBackoff)
    process: asyncio.subprocess.Process | None = None
    started_at: float = 0.0  # monotonic, when the current process was spawned
    serving: asyncio.Event = field(default_factory=asyncio.Event)
    port: int = 0  # its own coordinator port (advertised)
    metrics_port: int | None = None
    member_id: str = ""  # in the cluster's group, as last reported
    restarts: int = 0

    @property
    def node_id(self) -> int:
        return self.settings.coordinator_node_id

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None


class Supervisor:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.embedded: EmbeddedBroker | None = None
        self.bootstrap = list(settings.bootstrap_servers)
        self.security: UpstreamSecurity | None = None
        self.workers: list[Worker] = []
        self.endpoint: SupervisorEndpoint | None = None
        self.stopping = False
        self.stop_requested = asyncio.Event()
        self.fatal: str | None = None
        self._tasks: list[asyncio.Task[None]] = []

    # -- start --------------------------------------------------------------------------------------
    async def start(self) -> None:
        s = self.settings
        self.security = upstream_security(s, warn=False)
        if s.metrics is not None:
            self.endpoint = SupervisorEndpoint(self._metrics_ports, lambda: self.stopping)
            await self.endpoint.start(*s.metrics)
        listen = s.listen
        if listen[1] == 0:  # every worker must accept on the same port: pick it here
            listen = (listen[0], free_port(listen[0] or "0.0.0.0"))
        if not self.bootstrap:
            self.embedded = EmbeddedBroker()
            await self.embedded.start()
            self.bootstrap = [self.embedded.address]
            self._tasks.append(asyncio.ensure_future(self._watch_embedded(self.embedded)))
        base = replace(s, listen=listen)
        for index in range(s.workers):
            settings = worker_settings(base, index, self.bootstrap, self.embedded is not None)
            self.workers.append(Worker(index, settings))
        for worker in self.workers:
            self._tasks.append(asyncio.ensure_future(self._keep(worker)))
        await self._wait_serving()
        if self.fatal is not None:
            raise RuntimeError(self.fatal)
        if self.stop_requested.is_set():
            return  # SIGTERM while starting: supervise() stops what started
        if not all(w.serving.is_set() for w in self.workers):
            raise RuntimeError(f"the workers did not all serve within {START_TIMEOUT:.0f} s")
        log.info(
            "kcoord workers serving on %s:%d: %d workers, nodes %s at ports %s, upstream %s",
            listen[0],
            listen[1],
            len(self.workers),
            ",".join(str(w.node_id) for w in self.workers),
            ",".join(str(w.port) for w in self.workers),
            ",".join(f"{h}:{p}" for h, p in self.bootstrap),
        )

    async def _wait_serving(self) -> None:
        """Until every worker serves, the start fails (``fatal``) or times out."""
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline and not self.stop_requested.is_set():
            if all(w.serving.is_set() for w in self.workers):
                return
            await asyncio.sleep(0.05)

    def _metrics_ports(self) -> dict[int, int | None]:
        return {w.index: (w.metrics_port if w.running else None) for w in self.workers}

    # -- one worker, for as long as the supervisor runs ------------------------------------------------
    async def _keep(self, worker: Worker) -> None:
        while not self.stop_requested.is_set():
            how = await self._run_once(worker)
            if self.stop_requested.is_set():
                return  # stopping: a terminal's Ctrl-C reaches the workers too, before stop() does
            if not worker.serving.is_set() and worker.restarts == 0:
                # It never served: a bad setting or a port taken, which a restart does not cure.
                self.fatal = f"worker {worker.index} (node {worker.node_id}) {how} before it served"
                self.stop_requested.set()
                return
            ran_for = time.monotonic() - worker.started_at
            removed = await self._remove_from_cluster(worker, how)
            delay = worker.backoff.delay_after(ran_for)
            worker.restarts += 1
            log.warning(
                "worker %d (node %d) %s after %.1f s; %s; starting it again in %.1f s (restart %d)",
                worker.index,
                worker.node_id,
                how,
                ran_for,
                removed,
                delay,
                worker.restarts,
            )
            try:
                await asyncio.wait_for(self.stop_requested.wait(), delay)
                return  # stopping meanwhile
            except TimeoutError:
                pass

    async def _run_once(self, worker: Worker) -> str:
        """Run one process of ``worker`` until it exits; returns how it exited."""
        worker.member_id = ""
        worker.metrics_port = None
        worker.started_at = time.monotonic()
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "kcoord.coordinator.workers.worker",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        worker.process = process
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(pickle.dumps(WorkerSpec(worker.index, worker.settings)))
        with contextlib.suppress(ConnectionError):
            await process.stdin.drain()
        process.stdin.close()
        while line := await process.stdout.readline():
            self._heard(worker, line)
        code = await process.wait()
        return describe_exit(code)

    def _heard(self, worker: Worker, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            return  # not a report (a library printing to stdout): ignored
        if not isinstance(message, dict):
            return
        if "member" in message:
            worker.member_id = str(message["member"])
        started = message.get("started")
        if isinstance(started, dict):
            worker.port = int(started.get("port", 0))
            worker.metrics_port = started.get("metrics_port")
            worker.serving.set()
            pid = worker.process.pid if worker.process is not None else None
            log.info(
                "worker %d (node %d, pid %s) serves on port %d",
                worker.index,
                worker.node_id,
                pid,
                worker.port,
            )

    async def _remove_from_cluster(self, worker: Worker, how: str) -> str:
        assert self.security is not None
        s = worker.settings
        instance_id = instance_id_for(worker.node_id) if s.cluster_static_membership else None
        if not worker.member_id and instance_id is None:
            return "it had no member id in the cluster's group yet"
        # A static member is removed by its instance id even before it told its member id
        # (KIP-345: an unknown member id with an instance id names the static member).
        return await remove_member(
            self.bootstrap,
            group_id_for(s.internal_topic),
            worker.member_id,
            instance_id,
            f"kcoord worker {worker.index} {how}",
            self.security,
        )

    async def _watch_embedded(self, broker: EmbeddedBroker) -> None:
        how = await broker.wait_exit()
        if not self.stop_requested.is_set():
            self.fatal = f"the embedded broker {how}; its log: {broker.log_path}"
            self.stop_requested.set()

    # -- stop -----------------------------------------------------------------------------------------
    async def stop(self) -> None:
        self.stopping = True
        self.stop_requested.set()
        await asyncio.gather(*(self._stop_worker(w) for w in self.workers))
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self.embedded is not None:
            # Its workers are gone by now; tansu's graceful exit can still wait out a rebalance it
            # holds (half the session timeout) for members that no longer exist.
            await self.embedded.stop_async(EMBEDDED_STOP_TIMEOUT)
        if self.endpoint is not None:
            await self.endpoint.close()

    async def _stop_worker(self, worker: Worker) -> None:
        process = worker.process
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), STOP_TIMEOUT)
        except TimeoutError:
            log.warning("worker %d did not stop within %.0f s: killed", worker.index, STOP_TIMEOUT)
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()


async def supervise(settings: Settings) -> int:
    """``kcoord serve --workers N`` (N > 1): run until SIGTERM/SIGINT; the exit code as one process's."""
    supervisor = Supervisor(settings)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, supervisor.stop_requested.set)
    try:
        await supervisor.start()
    except Exception as exc:
        log.error("kcoord failed to start: %s", exc)
        await supervisor.stop()
        return 1
    await supervisor.stop_requested.wait()
    if supervisor.fatal is not None:
        log.error("kcoord stops: %s", supervisor.fatal)
        await supervisor.stop()
        return EXIT_FATAL
    log.info("shutting down: stopping %d workers", len(supervisor.workers))
    await supervisor.stop()
    log.info("stopped")
    return 0
