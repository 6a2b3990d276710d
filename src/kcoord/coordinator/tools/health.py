"""``kcoord health``: is the kcoord in this container ready (or, ``--live``, alive)? The image's HEALTHCHECK.

It asks /readyz (``--live``: /healthz) on the metrics address kcoord was configured with, read the way ``kcoord serve``
reads it: the flags of the serving process (PID 1 in a container: ``ENTRYPOINT ["kcoord"]``, so
/proc/1/cmdline is ``kcoord serve ...``), the KCOORD_* environment and KCOORD_CONFIG. A healthcheck
that hard-codes a port goes wrong as soon as someone passes ``--metrics`` with another one.
Readiness is the default because Docker's "healthy" is what ``depends_on: condition:
service_healthy`` and load balancers wait for: shards loaded and the upstream answering.
With metrics off there is no /readyz; then a TCP connect to the listen address is the check.
Exit 0 healthy, 1 not (the reason on stderr), 2 when the configuration cannot be read.
"""

from __future__ import annotations

import argparse
import socket
import sys
import urllib.request
from pathlib import Path
from typing import Any

from kcoord.coordinator.ops import config


def add_health_parser(sub: Any) -> None:
    health = sub.add_parser(
        "health",
        help="check the kcoord serving in this container (its /readyz, or /healthz with --live)",
        description="Exit 0 when /readyz (--live: /healthz) on kcoord's configured metrics address "
        "answers 200.",
    )
    health.add_argument(
        "--live",
        action="store_true",
        help="ask /healthz (liveness: the process works) instead of /readyz (readiness)",
    )
    health.add_argument(
        "--pid", type=int, default=1, help="the serving process whose flags to read (default 1)"
    )
    health.add_argument("--timeout", type=float, default=3.0, help="seconds")


def serve_argv(pid: int) -> list[str]:
    """``serve ...`` as the process ``pid`` was started with, or ``serve`` alone (env/config only)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return ["serve"]
    if "serve" in argv:
        return argv[argv.index("serve") : -1] if argv[-1] == "" else argv[argv.index("serve") :]
    return ["serve"]


def _local(host: str) -> str:
    # A wildcard listen address is reachable on loopback from inside the container.
    return {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(host, host)


def _serve_parser() -> argparse.ArgumentParser:
    # The same option table `kcoord serve` parses (tools sit below the CLI: no import of cli here).
    parser = argparse.ArgumentParser(prog="kcoord serve", add_help=False)
    config.add_serve_arguments(parser)
    return parser


def run_health(args: argparse.Namespace) -> int:
    try:
        serve_args = _serve_parser().parse_args(serve_argv(args.pid)[1:])
        settings = config.resolve(serve_args).settings
    except (config.ConfigError, SystemExit) as exc:
        print(f"kcoord health: cannot read kcoord's configuration: {exc}", file=sys.stderr)
        return 2
    if settings.metrics is None:
        host, port = _local(settings.listen[0]), settings.listen[1]
        try:
            socket.create_connection((host, port), timeout=args.timeout).close()
        except OSError as exc:
            print(f"kcoord health: metrics off and {host}:{port} refuses connections: {exc}", file=sys.stderr)
            return 1
        return 0
    host, port = _local(settings.metrics[0]), settings.metrics[1]
    path = "/healthz" if args.live else "/readyz"
    url = f"http://[{host}]:{port}{path}" if ":" in host else f"http://{host}:{port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=args.timeout) as resp:
            if resp.status == 200:
                return 0
            print(f"kcoord health: {url} answered {resp.status}", file=sys.stderr)
    except OSError as exc:  # urllib's HTTPError (503 while not ready) is an OSError too
        print(f"kcoord health: {url}: {exc}", file=sys.stderr)
    return 1
