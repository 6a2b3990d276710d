"""The workers' /metrics, /readyz answers fetched and merged into the supervisor's one answer.

Merging is pure text work on Prometheus' exposition format: every sample of worker ``i`` gets the
label ``worker="i"``, and each metric family is written once (its HELP and TYPE lines, then the
samples of every worker), as the format requires. Nothing is summed: ``sum without (worker)`` in
PromQL gives the host's total, and a per-worker view is still there.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

FETCH_TIMEOUT = 2.0  # seconds for one worker's answer


@dataclass
class _Family:
    meta: dict[str, str] = field(default_factory=dict)  # "HELP"/"TYPE" -> its line
    samples: list[str] = field(default_factory=list)


def _with_label(sample: str, label: str) -> str:
    """``name{a="b"} 1`` -> ``name{worker="0",a="b"} 1``; ``name 1`` -> ``name{worker="0"} 1``."""
    brace = sample.find("{")
    space = sample.find(" ")
    if brace != -1 and (space == -1 or brace < space):
        inner = sample[brace + 1 :]
        return f"{sample[: brace + 1]}{label}{'' if inner.startswith('}') else ','}{inner}"
    if space == -1:
        return sample
    return f"{sample[:space]}{{{label}}}{sample[space:]}"


def merge_metrics(texts: dict[int, str]) -> str:
    """One exposition of every worker's metrics (worker index -> its /metrics text)."""
    families: dict[str, _Family] = {}
    for index, text in sorted(texts.items()):
        label = f'worker="{index}"'
        current: _Family | None = None
        for line in text.splitlines():
            if not line.strip():
                continue
            if line.startswith("# "):
                parts = line.split(" ", 3)
                if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                    current = families.setdefault(parts[2], _Family())
                    current.meta.setdefault(parts[1], line)  # the same in every worker: kept once
                continue
            if current is None:
                current = families.setdefault("", _Family())
            current.samples.append(_with_label(line, label))
    out: list[str] = []
    for family in families.values():
        out.extend(family.meta.values())
        out.extend(family.samples)
    return "\n".join(out) + "\n"


async def http_get(host: str, port: int, path: str) -> tuple[int, bytes]:
    """(status, body) of a GET to a worker's endpoint (ops/observability.py answers with a
    Content-Length and keeps the connection open, so the body is read by its length)."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), FETCH_TIMEOUT)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode("latin-1"))
        status_line = await asyncio.wait_for(reader.readline(), FETCH_TIMEOUT)
        status = int(status_line.split()[1])
        length = 0
        while True:
            header = await asyncio.wait_for(reader.readline(), FETCH_TIMEOUT)
            if header in (b"\r\n", b"\n", b""):
                break
            name, _, value = header.decode("latin-1").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        body = await asyncio.wait_for(reader.readexactly(length), FETCH_TIMEOUT)
        return status, body
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
