"""One worker process: ``python -m kcoord.coordinator.workers.worker``, started by the supervisor.

Its :class:`WorkerSpec` arrives pickled on stdin (the supervisor's own, already checked settings);
it runs as ``kcoord serve`` does, and tells the supervisor on stdout, one JSON object a line:
``{"started": {"port": P, "metrics_port": M}}`` once it serves, and ``{"member": ID}`` whenever
its member id in the cluster's group changes (the supervisor removes a dead worker by it).
Its log goes to stderr, shared with the supervisor's.
"""

from __future__ import annotations

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


def report_member_id(member_id: str) -> None:
    if member_id:  # "": the coordinator forgot it; the next join's id follows
        report({"member": member_id})


def started(app: App) -> None:
    metrics_port = app.metrics_server.port if app.metrics_server is not None else None
    report({"started": {"port": app.port, "metrics_port": metrics_port}})
    membership = app.membership
    if membership is not None:
        # Told as it changes, not polled: a poll 20 times a second was most of an idle worker's
        # ~35 wake-ups a second (each followed by 2-4 polls of the event loop).
        membership.on_member_id = report_member_id
        report_member_id(membership.member_id)  # a join that completed before the process served


def main() -> int:
    die_with_parent()
    spec: WorkerSpec = pickle.load(sys.stdin.buffer)
    settings = spec.settings
    setup_logging(settings.log_level, settings.log_format)
    return run_loop(serve(settings, started))


if __name__ == "__main__":
    sys.exit(main())
