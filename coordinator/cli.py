"""``kcoord`` command line: ``kcoord serve`` runs the coordinator."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys

from .settings import Settings, parse_host_port

log = logging.getLogger("kcoord")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kcoord", description="A Kafka group coordinator that fronts a Kafka cluster")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run kcoord", formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    serve.add_argument("--listen", default="127.0.0.1:9092", help="HOST:PORT of kcoord's bootstrap and coordinator listener")
    serve.add_argument(
        "--bootstrap-server", default="",
        help="upstream cluster HOST:PORT[,HOST:PORT...]; empty starts the embedded tansu broker (memory only)",
    )
    serve.add_argument("--advertised-host", default=None, help="host clients are told to connect to (default: listen host)")
    serve.add_argument(
        "--broker-ports", default="",
        help="comma-separated kcoord ports for the upstream brokers, in node id order (default: listen port+1, +2, ...)",
    )
    serve.add_argument("--shards", type=int, default=50, help="coordinator shards (internal topic partitions)")
    serve.add_argument(
        "--storage", choices=["kafka", "memory"], default="kafka",
        help="kafka: the internal compacted topic on the upstream cluster; memory: lost on exit",
    )
    serve.add_argument("--internal-topic", default="__kcoord_offsets", help="compacted topic for group state (--storage kafka)")
    serve.add_argument(
        "--replication-factor", type=int, default=None,
        help="replication factor when creating the internal topic (default: min(3, brokers))",
    )
    serve.add_argument("--max-frame-size", type=int, default=100 * 1024 * 1024, help="largest request accepted, bytes")
    serve.add_argument("--max-inflight", type=int, default=1000, help="requests in flight per connection")
    serve.add_argument("--log-level", default="INFO")
    return parser


def settings_from_args(args: argparse.Namespace) -> Settings:
    bootstrap = [parse_host_port(x) for x in args.bootstrap_server.split(",") if x.strip()]
    broker_ports = [int(x) for x in args.broker_ports.split(",") if x.strip()]
    if args.shards < 1:
        raise SystemExit("kcoord: --shards must be at least 1")
    if args.replication_factor is not None and args.replication_factor < 1:
        raise SystemExit("kcoord: --replication-factor must be at least 1")
    if args.max_frame_size < 1024:
        raise SystemExit("kcoord: --max-frame-size must be at least 1024")
    return Settings(
        listen=parse_host_port(args.listen),
        advertised_host=args.advertised_host,
        bootstrap_servers=bootstrap,
        broker_ports=broker_ports,
        shards=args.shards,
        storage=args.storage,
        internal_topic=args.internal_topic,
        replication_factor=args.replication_factor,
        max_frame_size=args.max_frame_size,
        max_inflight=args.max_inflight,
    )


async def serve(settings: Settings) -> int:
    from .server import App

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
    await stop.wait()
    log.info("shutting down: no new connections, finishing in-flight requests")
    await app.stop()
    log.info("stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    if args.command == "serve":
        settings = settings_from_args(args)
        try:
            import uvloop

            return uvloop.run(serve(settings))
        except ImportError:
            return asyncio.run(serve(settings))
    return 2


if __name__ == "__main__":
    sys.exit(main())
