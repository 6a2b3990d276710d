"""Codec micro-benchmark: kcoord's generated encoders/decoders against kafka-python 3.x's generic codec.

    .venv/bin/python -m bench.codec             # print the table
    .venv/bin/python -m bench.codec --write     # also replace the table in bench/RESULTS.md (## Codec)
    .venv/bin/python -m bench.codec --quick     # fewer repeats, for a smoke run

For each message both codecs encode the *same* message (ours is converted field by field into
kafka-python's objects, and the two encodings are checked to be byte-identical before timing) and
decode the same bytes. Each figure is the best of ``--repeat`` timeit runs (process CPU time, ours and kafka-python's
repeats interleaved) in this one process, in µs per operation; "ratio" is kafka-python's time divided by ours (> 1: ours is faster). The
target is a ratio of at least 3 for Heartbeat, JoinGroup, SyncGroup and OffsetCommit,
both directions.

"Decode ours" is the active decoder backend (``kcoord.protocol.codegen.DECODER_BACKEND``: the C extension
``kcoord.protocol._cdecode`` when it is built, which is the default). The table also times our generated
pure-Python decoders on the same bytes in the same interleaved run, through the same
``Message.decode`` wrapper, so the gain of the extension and the fallback's standing against
kafka-python are both visible. Run with ``KCOORD_PURE_PYTHON=1`` to make the fallback "ours".

Messages (the sizes of a 10-member consumer group):
Heartbeat v4 request/response; JoinGroup v9 request with 2 protocols of ~100-byte metadata and
response with 10 members; SyncGroup v5 leader request with 10 assignments and its response;
OffsetCommit v9 request of 1 topic x 10 partitions and its response; OffsetFetch v9 request for
1 group/1 topic/10 partitions and its response.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import subprocess
import sys
import time
import timeit
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer import group as kp_group

from kcoord.protocol import messages as m
from kcoord.protocol.codec import DECODER_BACKEND, Message
from kcoord.protocol.schema import Field

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
TABLE_START = "<!-- bench.codec table: start -->"
TABLE_END = "<!-- bench.codec table: end -->"
TARGET_RATIO = 3.0
TARGET_MESSAGES = ("Heartbeat", "JoinGroup", "SyncGroup", "OffsetCommit")


# -- the messages ---------------------------------------------------------------------------------------

MEMBER_IDS = [f"consumer-{i}-5f2b9c3e-8d1a-4e7f-b6c2-{i:012d}" for i in range(10)]
TOPICS = ["orders", "payments"]


def _subscription() -> bytes:
    sub = m.ConsumerProtocolSubscription(
        topics=TOPICS,
        owned_partitions=[m.ConsumerProtocolSubscription.TopicPartition(topic="orders", partitions=[0, 1])],
    )
    return b"\x00\x01" + sub.encode(1)


def _assignment(i: int) -> bytes:
    tp = m.ConsumerProtocolAssignment.TopicPartition
    asg = m.ConsumerProtocolAssignment(
        assigned_partitions=[tp(topic="orders", partitions=[i, i + 10]), tp(topic="payments", partitions=[i])]
    )
    return b"\x00\x01" + asg.encode(1)


def build_messages() -> list[tuple[str, type[Message], int, Message]]:
    """(label, class, version, message) for every benchmarked message."""
    metadata = _subscription()
    metadata = metadata + b"\x00" * max(0, 100 - len(metadata))  # ~100-byte protocol metadata
    join_req = m.JoinGroupRequest(
        group_id="bench-group",
        session_timeout_ms=45000,
        rebalance_timeout_ms=300000,
        member_id=MEMBER_IDS[0],
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[
            m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=metadata),
            m.JoinGroupRequest.JoinGroupRequestProtocol(name="cooperative-sticky", metadata=metadata),
        ],
        reason=None,
    )
    join_resp = m.JoinGroupResponse(
        generation_id=7,
        protocol_type="consumer",
        protocol_name="range",
        leader=MEMBER_IDS[0],
        member_id=MEMBER_IDS[0],
        members=[
            m.JoinGroupResponse.JoinGroupResponseMember(member_id=mid, metadata=metadata)
            for mid in MEMBER_IDS
        ],
    )
    sync_req = m.SyncGroupRequest(
        group_id="bench-group",
        generation_id=7,
        member_id=MEMBER_IDS[0],
        protocol_type="consumer",
        protocol_name="range",
        assignments=[
            m.SyncGroupRequest.SyncGroupRequestAssignment(member_id=mid, assignment=_assignment(i))
            for i, mid in enumerate(MEMBER_IDS)
        ],
    )
    sync_resp = m.SyncGroupResponse(
        protocol_type="consumer", protocol_name="range", assignment=_assignment(0)
    )
    commit_req = m.OffsetCommitRequest(
        group_id="bench-group",
        generation_id_or_member_epoch=7,
        member_id=MEMBER_IDS[0],
        topics=[
            m.OffsetCommitRequest.OffsetCommitRequestTopic(
                name="orders",
                partitions=[
                    m.OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=p,
                        committed_offset=1_000_000 + p,
                        committed_leader_epoch=3,
                        committed_metadata="",
                    )
                    for p in range(10)
                ],
            )
        ],
    )
    commit_resp = m.OffsetCommitResponse(
        topics=[
            m.OffsetCommitResponse.OffsetCommitResponseTopic(
                name="orders",
                partitions=[
                    m.OffsetCommitResponse.OffsetCommitResponsePartition(partition_index=p) for p in range(10)
                ],
            )
        ]
    )
    fetch_req = m.OffsetFetchRequest(
        groups=[
            m.OffsetFetchRequest.OffsetFetchRequestGroup(
                group_id="bench-group",
                member_id=MEMBER_IDS[0],
                member_epoch=7,
                topics=[
                    m.OffsetFetchRequest.OffsetFetchRequestTopics(
                        name="orders", partition_indexes=list(range(10))
                    )
                ],
            )
        ],
        require_stable=True,
    )
    fetch_resp = m.OffsetFetchResponse(
        groups=[
            m.OffsetFetchResponse.OffsetFetchResponseGroup(
                group_id="bench-group",
                topics=[
                    m.OffsetFetchResponse.OffsetFetchResponseTopics(
                        name="orders",
                        partitions=[
                            m.OffsetFetchResponse.OffsetFetchResponsePartitions(
                                partition_index=p,
                                committed_offset=1_000_000 + p,
                                committed_leader_epoch=3,
                                metadata="",
                            )
                            for p in range(10)
                        ],
                    )
                ],
            )
        ]
    )
    return [
        (
            "Heartbeat request v4",
            m.HeartbeatRequest,
            4,
            m.HeartbeatRequest(group_id="bench-group", generation_id=7, member_id=MEMBER_IDS[0]),
        ),
        ("Heartbeat response v4", m.HeartbeatResponse, 4, m.HeartbeatResponse(error_code=0)),
        ("JoinGroup request v9 (2 protocols)", m.JoinGroupRequest, 9, join_req),
        ("JoinGroup response v9 (10 members)", m.JoinGroupResponse, 9, join_resp),
        ("SyncGroup request v5 (leader, 10 assignments)", m.SyncGroupRequest, 5, sync_req),
        ("SyncGroup response v5", m.SyncGroupResponse, 5, sync_resp),
        ("OffsetCommit request v9 (1 topic x 10)", m.OffsetCommitRequest, 9, commit_req),
        ("OffsetCommit response v9 (1 topic x 10)", m.OffsetCommitResponse, 9, commit_resp),
        ("OffsetFetch request v9 (1 group, 10 partitions)", m.OffsetFetchRequest, 9, fetch_req),
        ("OffsetFetch response v9 (1 group, 10 partitions)", m.OffsetFetchResponse, 9, fetch_resp),
    ]


# -- the same message in kafka-python --------------------------------------------------------------------------


def kafka_python_class(cls: type[Message]) -> type[ApiMessage]:
    return getattr(kp_group, cls.__name__)


def to_kafka_python(obj: Any, fields: list[Field], kstruct: Any, version: int, data_class: Any) -> Any:
    """Our message → kafka-python's object of the same version (fields matched by spec position)."""
    kwargs = {}
    for f, kf in zip(fields, kstruct._fields, strict=True):
        if not f.present_in(version):
            continue
        value = getattr(obj, f.name)
        if value is not None and f.is_struct:
            if f.is_array:
                value = [to_kafka_python(x, f.fields, kf.array_of, version, kf.data_class) for x in value]
            else:
                value = to_kafka_python(value, f.fields, kf, version, kf.data_class)
        kwargs[kf.name] = value
    return data_class(version=version, **kwargs)


def pure_python_view(cls: type[Message]) -> type[Message]:
    """``cls`` with ``decode`` bound to the generated Python decoders (the fallback backend).

    A subclass that only overrides the decoder table, so ``.decode`` runs the very same wrapper
    code as ``cls.decode``; the objects it returns are still instances of ``cls``.
    """
    return type(f"{cls.__name__}PurePython", (cls,), {"__slots__": (), "_DECODERS": dict(cls._PY_DECODERS)})


# -- timing ---------------------------------------------------------------------------------------------------


def best_us(fns: list[Callable[[], object]], repeat: int, min_time: float) -> list[float]:
    """Best-of-``repeat`` µs per call for each of ``fns``, their repeats interleaved.

    Timed in process CPU time (``time.process_time``), not wall time: on a shared machine a
    descheduled slice would otherwise land in whichever codec happened to be running. Each
    repeat runs long enough (``min_time``) to swamp timer resolution, and ours and kafka-python's
    repeats alternate so both see the same conditions.
    """
    timers = [timeit.Timer(fn, timer=time.process_time) for fn in fns]
    numbers = []
    for timer in timers:
        number = 1
        while timer.timeit(number) < min_time:
            number *= 2
        numbers.append(number)
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, timer in enumerate(timers):
            best[i] = min(best[i], timer.timeit(numbers[i]) / numbers[i] * 1e6)
    return best


@dataclass
class Row:
    label: str
    size: int
    ours_encode: float
    kp_encode: float
    ours_decode: float
    kp_decode: float
    py_decode: float  # our pure-Python decoders (the fallback backend)

    @property
    def encode_ratio(self) -> float:
        return self.kp_encode / self.ours_encode

    @property
    def decode_ratio(self) -> float:
        return self.kp_decode / self.ours_decode

    @property
    def py_decode_ratio(self) -> float:
        return self.kp_decode / self.py_decode

    @property
    def targeted(self) -> bool:
        return self.label.startswith(TARGET_MESSAGES)


def measure(repeat: int, min_time: float) -> list[Row]:
    rows = []
    for label, cls, version, msg in build_messages():
        kp_cls = kafka_python_class(cls)
        kp_msg = to_kafka_python(msg, cls.SCHEMA.fields, kp_cls._struct, version, kp_cls)
        wire = msg.encode(version)
        theirs = bytes(kp_msg.encode(version=version))
        if theirs != wire:
            raise SystemExit(f"{label}: kafka-python and kcoord encode differently; not comparable")
        py_cls = pure_python_view(cls)
        if cls.decode(wire, version) != msg or py_cls.decode(wire, version) != msg:
            raise SystemExit(f"{label}: our round trip failed")
        ours_enc, kp_enc, ours_dec, kp_dec, py_dec = best_us(
            [
                partial(msg.encode, version),
                partial(kp_msg.encode, version=version),
                partial(cls.decode, wire, version),
                partial(kp_cls.decode, wire, version=version),
                partial(py_cls.decode, wire, version),
            ],
            repeat,
            min_time,
        )
        rows.append(Row(label, len(wire), ours_enc, kp_enc, ours_dec, kp_dec, py_dec))
    return rows


# -- reporting -----------------------------------------------------------------------------------------------------


def _mark(row: Row, ratio: float) -> str:
    text = f"{ratio:.1f}x"
    if row.targeted:
        text = f"**{text}**" if ratio >= TARGET_RATIO else f"{text} (below 3x)"
    return text


def table(rows: list[Row]) -> str:
    ours = "C" if DECODER_BACKEND == "c" else "pure Python"
    lines = [
        "| message | bytes | encode ours µs | encode kafka-python µs | encode ratio "
        f"| decode ours ({ours}) µs | decode kafka-python µs | decode ratio "
        "| decode ours, pure Python µs | pure-Python decode ratio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.label} | {r.size} | {r.ours_encode:.2f} | {r.kp_encode:.2f} | {_mark(r, r.encode_ratio)} "
            f"| {r.ours_decode:.2f} | {r.kp_decode:.2f} | {_mark(r, r.decode_ratio)} "
            f"| {r.py_decode:.2f} | {r.py_decode_ratio:.1f}x |"
        )
    return "\n".join(lines)


def run_info(repeat: int) -> str:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=RESULTS.parent.parent,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "src/kcoord/protocol"],
            capture_output=True,
            text=True,
            check=True,
            cwd=RESULTS.parent.parent,
        ).stdout.strip()
        if dirty:
            commit += " + uncommitted src/kcoord/protocol/ changes"
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    import kafka

    return (
        f"- **Date:** {datetime.date.today().isoformat()} · **Commit:** {commit} · "
        f"**Machine:** {os.cpu_count()} cores ({platform.machine()}), CPython {platform.python_version()}, "
        f"kafka-python {kafka.__version__}, decoder backend `{DECODER_BACKEND}`\n"
        f"- **Command:** `.venv/bin/python -m bench.codec` (best of {repeat} timeit repeats, one process)"
    )


def write_results(block: str) -> None:
    """Replace the marked table block inside ``## Codec`` (creating the section if it is missing)."""
    text = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else "# Benchmark results\n"
    wrapped = f"{TABLE_START}\n{block}\n{TABLE_END}"
    if TABLE_START in text and TABLE_END in text:
        text = re.sub(
            re.escape(TABLE_START) + r".*?" + re.escape(TABLE_END), lambda _: wrapped, text, flags=re.S
        )
    else:
        text = text.rstrip("\n") + f"\n\n## Codec\n\n{wrapped}\n"
    RESULTS.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--repeat", type=int, default=7, help="timeit repeats; the best is reported (default 7)"
    )
    parser.add_argument(
        "--min-time", type=float, default=0.05, help="seconds per repeat, at least (default 0.05)"
    )
    parser.add_argument("--quick", action="store_true", help="3 repeats of 10 ms: a smoke run")
    parser.add_argument("--write", action="store_true", help=f"replace the table in {RESULTS.name}")
    args = parser.parse_args(argv)
    repeat, min_time = (3, 0.01) if args.quick else (args.repeat, args.min_time)
    rows = measure(repeat, min_time)
    block = run_info(repeat) + "\n\n" + table(rows)
    print(block)
    missed = [r.label for r in rows if r.targeted and min(r.encode_ratio, r.decode_ratio) < TARGET_RATIO]
    print(
        f"\ntarget (>= {TARGET_RATIO:.0f}x, {', '.join(TARGET_MESSAGES)}): {'missed by ' + '; '.join(missed) if missed else 'met'}"
    )
    if args.write:
        write_results(block)
        print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
