"""kcoord's memory and an honest client's latency while hostile clients pipeline huge requests.

    .venv/bin/python -m bench.hostile_clients                         # 8 and 64 never-readers, one reader
    .venv/bin/python -m bench.hostile_clients --attackers 8 --no-reader
    .venv/bin/python -m bench.hostile_clients --kcoord-arg=--max-inflight --kcoord-arg=10

Each scenario runs on a fresh ``kcoord serve`` (embedded tansu, ``--storage memory``, every
connection setting at its default unless ``--kcoord-arg`` says otherwise). A probe member
heartbeats every 5 ms on a connection of its own (support/hostile_clients.py): its round trips are
timed for ``--idle`` seconds with nothing else running (idle), then while the attack runs.

- never-readers: N connections pipeline DescribeGroups v5 requests naming ``--ids`` group ids each
  (~0.5 MB answers) as fast as kcoord reads them and never read an answer, for ``--attack``
  seconds; then they close and kcoord's RSS is read again after ``--settle`` seconds.
- reader: one connection sends ``--reader-requests`` such requests back to back and reads every
  answer; its total time is printed.

kcoord's VmRSS and CPU time are sampled every 0.2 s. A run whose RSS passes ``--rss-abort-mib``
stops the attack there (the machine is shared) and says so. One JSON line per scenario follows the
summary, with, per second of the attack, kcoord's CPU use (1.0: one core) and the probe's p99
(``cpu_by_second``, ``probe_p99_ms_by_second``), and the DescribeGroups requests kcoord dispatched
(``describe_dispatched``, from its /metrics: the answers it computed or began).

``--loop-trace DIR`` runs kcoord under support/loop_trace.py: the CPU of each of its event loop's
iterations, which does not depend on the machine's load as the probe's wall-clock p99 does. Printed
per scenario for the attack's window: iterations over 0.5, 1 and 2 ms of CPU, the longest (in all,
and in the attack's first second), and the CPU of those over 0.5 ms by part. The loop then never
sleeps, so the probe's latencies of a traced run are not comparable with an untraced run's.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable

from support.hostile_clients import (
    Latencies,
    NeverReaders,
    PipeliningReader,
    Probe,
    describe_groups_dispatched,
    describe_groups_frame,
    rss_mib,
)
from support.kcoord_process import KcoordProcess
from support.loadgen.procstat import cpu_seconds
from support.loop_trace import summarize
from support.ports import free_port


def sample_until(
    pid: int,
    seconds: float,
    abort_mib: float,
    done: Callable[[], bool] | None = None,
    cpu: list[tuple[float, float]] | None = None,
) -> float:
    """The peak RSS over ``seconds`` (earlier if it passes ``abort_mib`` or ``done()``); ``cpu``
    gets (perf_counter, CPU seconds) samples."""
    peak = 0.0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        peak = max(peak, rss_mib(pid))
        if cpu is not None:
            cpu.append((time.perf_counter(), cpu_seconds(pid)))
        if peak > abort_mib or (done is not None and done()):
            break
        time.sleep(0.2)
    return peak


def cpu_by_second(samples: list[tuple[float, float]]) -> list[float]:
    """CPU use (1.0: one core busy) in each whole second from the first sample."""
    if not samples:
        return []
    start, used = samples[0]
    out = []
    for at, total in samples[1:]:
        if at - start >= 1.0:
            out.append(round((total - used) / (at - start), 2))
            start, used = at, total
    return out


def p99_by_second(latencies: Latencies, start: float) -> list[float]:
    """The probe's p99 (ms) for each second from ``start``."""
    buckets: dict[int, list[float]] = {}
    for at, seconds in zip(latencies.sent_at, latencies.seconds, strict=True):
        buckets.setdefault(int(at - start), []).append(seconds)
    return [
        round(Latencies(sorted(buckets.get(i, [])), []).quantile(0.99) * 1000, 1)
        for i in range(max(buckets, default=-1) + 1)
    ]


def run(scenario: str, args: argparse.Namespace) -> dict[str, object]:
    metrics = f"127.0.0.1:{free_port()}"
    module, trace = "kcoord.coordinator", ""
    if args.loop_trace:
        module = "support.loop_trace"
        trace = os.path.join(args.loop_trace, f"loop-{scenario}-{time.strftime('%H%M%S')}.jsonl")
        os.environ["KCOORD_LOOP_TRACE"] = trace
    try:
        proc = KcoordProcess(
            "--storage", "memory", "--metrics", metrics, *args.kcoord_arg, module=module
        ).start()
    finally:
        os.environ.pop("KCOORD_LOOP_TRACE", None)
    assert proc.process is not None
    pid = proc.process.pid
    result: dict[str, object] = {"scenario": scenario, "kcoord_args": args.kcoord_arg, "ids": args.ids}
    try:
        probe = Probe(proc.bootstrap, "probe-group").start()
        frame = describe_groups_frame(args.ids, "hostile")
        time.sleep(args.idle)
        idle = probe.window()
        base = rss_mib(pid)
        started = time.monotonic()
        attack_start = time.perf_counter()
        attack_end = 0.0  # the never-readers' (the reader's is its time)
        cpu: list[tuple[float, float]] = []
        if scenario == "reader":
            reader = PipeliningReader(proc.bootstrap, args.reader_requests, frame).start()
            peak = sample_until(
                pid,
                args.reader_timeout,
                args.rss_abort_mib,
                lambda: reader.answered >= reader.requests,
                cpu,
            )
            attacked = probe.window()
            complete = reader.wait(0.1)
            result.update(
                reader_answered=reader.answered, reader_complete=complete,
                reader_seconds=round(reader.seconds if complete else time.monotonic() - started, 1),
                reader_error=repr(reader.error) if reader.error else None,
            )  # fmt: skip
            reader.close()
        else:
            attackers = NeverReaders(proc.bootstrap, int(scenario), frame, args.attackers_nice).start()
            peak = sample_until(pid, args.attack, args.rss_abort_mib, cpu=cpu)
            attacked = probe.window()
            attack_end = time.perf_counter()
            result.update(
                sent_mib=round(attackers.sent / 2**20, 1),
                closed_by_kcoord=attackers.closed_by_server,
                describe_dispatched=describe_groups_dispatched(metrics),
            )
            attackers.close()
        result["attack_seconds"] = round(time.monotonic() - started, 1)
        result["cpu_by_second"] = cpu_by_second(cpu)
        result["probe_p99_ms_by_second"] = p99_by_second(attacked, attack_start)
        result["aborted_at_rss_limit"] = peak > args.rss_abort_mib
        peak = max(peak, sample_until(pid, args.settle, float("inf")))
        after = rss_mib(pid)
        settled = probe.window()
        probe.close()
        result.update(
            rss_base_mib=round(base), rss_peak_mib=round(peak), rss_after_mib=round(after),
            probe_idle_p50_ms=round(idle.quantile(0.5) * 1000, 2),
            probe_idle_p99_ms=round(idle.quantile(0.99) * 1000, 2),
            probe_attack_p50_ms=round(attacked.quantile(0.5) * 1000, 2),
            probe_attack_p99_ms=round(attacked.quantile(0.99) * 1000, 2),
            probe_attack_max_ms=round(max(attacked.seconds, default=0) * 1000, 1),
            probe_attack_n=len(attacked.seconds), probe_attack_failures=attacked.failures,
            probe_after_p99_ms=round(settled.quantile(0.99) * 1000, 2),
        )  # fmt: skip
        result["closes"] = proc.log_tail(2000).count("closing connection")
        if trace:
            time.sleep(1.5)  # the trace is written once a second
            end = attack_end if scenario != "reader" else attack_start + float(str(result["reader_seconds"]))
            result["loop_trace"] = summarize(trace, attack_start, end)
    finally:
        proc.kill()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--attackers", type=int, action="append", help="never-reader counts (default 8 and 64; 0: none)"
    )
    parser.add_argument(
        "--attackers-nice",
        type=int,
        default=0,
        help="nice increment of the never-readers' process (19: as if they ran on other machines)",
    )
    parser.add_argument("--no-reader", action="store_true", help="skip the one pipelining reader")
    parser.add_argument("--ids", type=int, default=20_000, help="group ids per DescribeGroups")
    parser.add_argument("--idle", type=float, default=5.0, help="seconds of idle probing first")
    parser.add_argument("--attack", type=float, default=30.0, help="seconds the never-readers run")
    parser.add_argument("--settle", type=float, default=10.0, help="seconds after they close")
    parser.add_argument("--reader-requests", type=int, default=1000)
    parser.add_argument("--reader-timeout", type=float, default=180.0)
    parser.add_argument("--rss-abort-mib", type=float, default=3000.0)
    parser.add_argument("--kcoord-arg", action="append", default=[], help="an extra kcoord serve argument")
    parser.add_argument(
        "--loop-trace",
        metavar="DIR",
        help="trace kcoord's loop iterations (support/loop_trace.py) into DIR and summarize them",
    )
    args = parser.parse_args()
    counts = [n for n in (args.attackers or [8, 64]) if n > 0]
    scenarios = [str(n) for n in counts] + ([] if args.no_reader else ["reader"])
    results = []
    for scenario in scenarios:
        result = run(scenario, args)
        results.append(result)
        what = (
            f"1 reader x {args.reader_requests} requests"
            if scenario == "reader"
            else f"{scenario} never-readers"
        )
        print(
            f"{what}: RSS {result['rss_base_mib']} -> peak {result['rss_peak_mib']} -> after {result['rss_after_mib']} MiB"
            f"{' (ABORTED at the RSS limit)' if result['aborted_at_rss_limit'] else ''}; probe p50/p99 idle "
            f"{result['probe_idle_p50_ms']}/{result['probe_idle_p99_ms']} ms, under attack "
            f"{result['probe_attack_p50_ms']}/{result['probe_attack_p99_ms']} ms (max {result['probe_attack_max_ms']}, "
            f"{result['probe_attack_failures']} timeouts)"
            + (f"; reader done in {result['reader_seconds']} s" if scenario == "reader" else ""),
            flush=True,
        )
        if "loop_trace" in result:
            print(f"  loop iterations (thread CPU) during the attack: {result['loop_trace']}", flush=True)
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
