"""One worker process: ``python -m kcoord.coordinator.workers.worker``, started by the supervisor.

Its :class:`WorkerSpec` arrives pickled on stdin (the supervisor's own, already checked settings);
it runs as ``kcoord serve`` does, and tells the supervisor on stdout, one JSON object a line:
``{"started": {"port": P, "metrics_port": M}}`` once it serves, and ``{"member": ID}`` whenever
its member id in the cluster's group changes (the supervisor removes a dead worker by it).
Its log goes to stderr, shared with the supervisor's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import pickle
import signal
import sys
from dataclasses import dataclass
from typing import Any

from kcoord.coordinator.cli import run_loop, serve
from kcoord.coordinator.net.server import App
from kcoord.coordinator.ops.logs import setup_logging
from kcoord.coordinator.ops.settings import Settings

MEMBER_POLL_INTERVAL = 0.05  # seconds between looks at the member id (an attribute read; it rarely changes)
_background: set[asyncio.Task[None]] = set()  # referenced, so the loop does not drop the task


@dataclass(frozen=True)
class WorkerSpec:
    index: int
    settings: Settings


def report(message: dict[str, Any]) -> None:
    """One line to the supervisor. A supervisor that is gone reads nothing: the worker goes on
    until the SIGTERM it gets when its parent dies (die_with_parent)."""
    with contextlib.suppress(OSError):
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def die_with_parent() -> None:
    """Linux: SIGTERM when the supervisor dies, even by SIGKILL, so no worker outlives it."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


async def report_member_ids(app: App) -> None:
    reported = ""
    while True:
        membership = app.membership
        member_id = membership.member_id if membership is not None else ""
        if member_id and member_id != reported:
            report({"member": member_id})
            reported = member_id
        await asyncio.sleep(MEMBER_POLL_INTERVAL)


def started(app: App) -> None:
    metrics_port = app.metrics_server.port if app.metrics_server is not None else None
    report({"started": {"port": app.port, "metrics_port": metrics_port}})
    _background.add(asyncio.ensure_future(report_member_ids(app)))  # runs until the process ends


def main() -> int:
    die_with_parent()
    spec: WorkerSpec = pickle.load(sys.stdin.buffer)
    settings = spec.settings
    setup_logging(settings.log_level, settings.log_format)
    return run_loop(serve(settings, started))


if __name__ == "__main__":
    sys.exit(main())
