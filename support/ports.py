"""Free loopback ports for the servers the tests and benchmarks start."""

from __future__ import annotations

import random
import socket
from pathlib import Path

from kcoord.coordinator.net.embedded import free_port

__all__ = ["free_port", "free_port_block"]

_PORT_RNG = random.Random()  # not the global one, which tests may seed


def ephemeral_range_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port_block(count: int = 4, host: str = "127.0.0.1") -> int:
    """A base port such that base..base+count-1 are all free right now.

    Picked below the kernel's ephemeral range: a port in it can be handed to any outgoing
    connection between this check and the moment the server binds it.
    """
    top = ephemeral_range_start() - count
    bottom = max(1024, top - 12_000)
    if top <= bottom:  # an unusual ephemeral range: take our chances in the middle of the ports
        bottom, top = 20_000, 30_000
    for _ in range(200):
        base = _PORT_RNG.randrange(bottom, top)
        ok = True
        for p in range(base, base + count):
            with socket.socket() as t:
                try:
                    t.bind((host, p))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free port block")
