"""``kcoord`` command line: ``kcoord serve`` runs the coordinator, ``kcoord groups`` inspects its groups."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any

from .ops import config
from .ops.logs import setup_logging
from .ops.settings import Settings

if TYPE_CHECKING:
    from .net.server import App

log = logging.getLogger("kcoord")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kcoord", description="A Kafka group coordinator that fronts a Kafka cluster"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser(
        "serve",
        help="run kcoord",
        description="Run kcoord.",
        epilog=config.EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    config.add_serve_arguments(serve)
    from .tools.groups import add_groups_parser

    add_groups_parser(sub)
    from .tools.health import add_health_parser

    add_health_parser(sub)
    from kcoord.analytics.run import add_parser as add_analytics_parser

    add_analytics_parser(sub)
    return parser


def settings_from_args(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Settings:
    """Settings from flags, the environment and ``--config``; raises :class:`config.ConfigError`."""
    return config.resolve(args, environ).settings


# Young-generation collections every 700 allocations (CPython's default) cost a third of an
# offset commit's CPU in bench/request_path.py: each request allocates a few dozen short-lived
# objects, and every tenth young collection also walks the middle generation. Collecting every
# 50,000 allocations keeps the pause short (the young generation is mostly request garbage) and
# the cost per request small; kcoord owns its process, so this is set here, not in the library.
GC_THRESHOLDS = (50_000, 20, 100)


def tune_gc_for_serving() -> None:
    """Freeze what start-up and shard loading allocated (never garbage) and collect less often."""
    gc.collect()
    gc.freeze()  # loaded group state and modules leave the generations the collector walks
    gc.set_threshold(*GC_THRESHOLDS)


async def serve(settings: Settings, started: Callable[[App], None] | None = None) -> int:
    """Run one kcoord process until SIGTERM/SIGINT or a fatal error; ``started`` is told once it
    serves (a worker reports its ports to the supervisor there)."""
    from .net.server import App

    app = App(settings)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await app.start()
    except Exception as exc:
        log.error("kcoord failed to start: %s", exc)
        await app.stop(grace=0)
        return 1
    tune_gc_for_serving()
    if started is not None:
        started(app)
    fatal = asyncio.ensure_future(app.fatal_event.wait())
    await asyncio.wait([asyncio.ensure_future(stop.wait()), fatal], return_when=asyncio.FIRST_COMPLETED)
    if app.fatal is not None:
        log.error("kcoord stops: %s", app.fatal)
        await app.stop()
        return 3
    log.info("shutting down: no new connections, finishing in-flight requests")
    await app.stop()
    log.info("stopped")
    return 0


# What a shell reports for a command that SIGPIPE ended (128 + 13): ``kcoord groups ... | head``
# ends as ``cat ... | head`` does, quietly.
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE


def main(argv: list[str] | None = None) -> int:
    try:
        code = _run(argv)
        sys.stdout.flush()  # here, not at exit: a closed pipe then raises where it is caught
        return code
    except BrokenPipeError:
        # The reader of our output left (``| head``). Python ignores SIGPIPE, so the write raised;
        # stdout goes to /dev/null so the interpreter's own flush at exit does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE


def _run(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "groups":
        from .tools.groups import run_groups

        return run_groups(args)
    if args.command == "health":
        from .tools.health import run_health

        return run_health(args)
    if args.command == "analytics":
        from kcoord.analytics.run import run_cli

        return run_cli(args)
    if args.command != "serve":
        return 2
    try:
        resolved = config.resolve(args)
    except config.ConfigError as exc:
        print(f"kcoord serve: error: {exc}", file=sys.stderr)
        return 2
    settings = resolved.settings
    setup_logging(settings.log_level, settings.log_format)
    for warning in resolved.warnings:
        log.warning("%s", warning)
    log.info("configuration: %s", config.describe(resolved))
    if settings.workers > 1:
        from .workers.supervisor import supervise

        return run_loop(supervise(settings))
    return run_loop(serve(settings))


def run_loop(main: Coroutine[Any, Any, int]) -> int:
    """Run ``main`` on uvloop when it is installed, else on asyncio's own loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


if __name__ == "__main__":
    sys.exit(main())
