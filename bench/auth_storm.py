"""Failed SASL logins against kcoord: its memory, its CPU, its log, and an honest client meanwhile.

    .venv/bin/python -m bench.auth_storm                              # 1,000 a minute for 60 s, each listener
    .venv/bin/python -m bench.auth_storm --per-minute 6000 --seconds 30 --listener SASL_SSL

One Apache Kafka 4.0 (SASL_SSL and SASL_PLAINTEXT listeners, PLAIN and SCRAM users, certificates
from a CA made here) for the run. Per listener (``--listener``, default both), a fresh kcoord on
that listener in front of Kafka's SASL_SSL listener (kcoord logs in as its own user over TLS),
and on it:

- a probe, logged in on a connection of its own (SCRAM-SHA-512 on SASL_SSL, PLAIN on
  SASL_PLAINTEXT), commits an offset and fetches it back every 20 ms; its round trips are timed for
  ``--idle`` seconds with nothing else running (idle), then during the storm;
- the storm: ``--per-minute`` wrong passwords a minute for ``--seconds`` (same mechanism as the
  probe, a new connection each, TLS first on SASL_SSL) from 127.0.0.2, one peer host;
- kcoord's VmRSS is sampled every 0.2 s, and its CPU time (utime + stime) read before and after.

Reported per listener: each attempt's outcome (answered SASL_AUTHENTICATION_FAILED, closed by
kcoord), kcoord's failure counter, the log lines the storm caused, RSS base / peak / after
``--settle`` seconds, kcoord's CPU per failed login, and the probe's OffsetCommit and OffsetFetch
p50/p99 idle and during the storm. One JSON line per listener follows the summary.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from support.auth_storm import (
    CommitProbe,
    Endpoint,
    LoginStorm,
    kcoord_counter,
    metrics_text,
    rss_sampler,
    sasl_kcoord,
)
from support.certs import Pki, make_pki
from support.kafka_broker import KafkaBroker, SaslUsers
from support.kcoord_process import KcoordProcess
from support.workload import unique

USERS = {"alice": "alice-secret", "kcoord": "kcoord-secret"}
ATTACKER_HOST = "127.0.0.2"
PROBE_MECHANISM = {"SASL_SSL": "SCRAM-SHA-512", "SASL_PLAINTEXT": "PLAIN"}


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` (/proc/PID/stat fields 14 and 15, in clock ticks)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def run(listener: str, kafka: KafkaBroker, pki: Pki, args: argparse.Namespace) -> dict[str, object]:
    proc: KcoordProcess = sasl_kcoord(kafka, pki, listener, USERS["kcoord"])
    assert proc.process is not None
    pid = proc.process.pid
    mechanism = PROBE_MECHANISM[listener]
    ca = str(pki.ca) if listener == "SASL_SSL" else None
    topic = unique("auth-storm")
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})  # Kafka's PLAINTEXT listener
    admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(30)
    count = round(args.per_minute * args.seconds / 60)
    try:
        probe = CommitProbe(
            Endpoint(proc.bootstrap, ca), mechanism, "alice", USERS["alice"], unique("probe"), topic
        )
        probe.start()
        rss, stop_sampling = rss_sampler(pid)
        time.sleep(args.idle)
        idle = probe.window()
        lines_before = len(proc.log_path.read_text(errors="replace").splitlines())
        cpu_before = cpu_seconds(pid)
        storm = LoginStorm(Endpoint(proc.bootstrap, ca, ATTACKER_HOST), mechanism, "alice", "wrong-password",
                           rate=args.per_minute / 60, count=count, threads=args.threads).start()  # fmt: skip
        finished = storm.wait(args.seconds + 120)
        storm.stop()
        cpu_storm = cpu_seconds(pid) - cpu_before
        during = probe.window()
        rss_at_end = len(rss)
        time.sleep(args.settle)
        probe.close()
        stop_sampling.set()
        log = proc.log_path.read_text(errors="replace").splitlines()[lines_before:]
        totals = storm.totals()
        counted = kcoord_counter(
            metrics_text(proc), "kcoord_sasl_authentication_failures_total", mechanism=mechanism
        )
        result: dict[str, object] = {
            "listener": listener, "mechanism": mechanism, "per_minute": args.per_minute, "seconds": args.seconds,
            "storm_seconds": round(storm.seconds, 1), "finished": finished, **totals,
            "counted_by_kcoord": counted,
            "log_lines": len(log), "failed_login_lines": sum("failed SASL login" in line for line in log),
            "warnings": sum("level=WARNING" in line for line in log),
            "rss_base_mib": round(rss[0]), "rss_peak_mib": round(max(rss[:rss_at_end])),
            "rss_after_mib": round(rss[-1]),
            "rss_every_5s_mib": [round(v) for v in rss[::25]],  # sampled every 0.2 s
            "cpu_ms_per_login": round(cpu_storm * 1000 / max(1, totals["attempts"]), 2),
            "cpu_share": round(cpu_storm / max(storm.seconds, 1e-9), 3),
            "commit_idle_p50_ms": ms(idle.commit.quantile(0.5)), "commit_idle_p99_ms": ms(idle.commit.quantile(0.99)),
            "commit_storm_p50_ms": ms(during.commit.quantile(0.5)),
            "commit_storm_p99_ms": ms(during.commit.quantile(0.99)),
            "fetch_idle_p50_ms": ms(idle.fetch.quantile(0.5)), "fetch_idle_p99_ms": ms(idle.fetch.quantile(0.99)),
            "fetch_storm_p50_ms": ms(during.fetch.quantile(0.5)), "fetch_storm_p99_ms": ms(during.fetch.quantile(0.99)),
            "probe_storm_n": len(during.commit.seconds), "probe_errors": idle.errors + during.errors,
            "kcoord_alive": proc.alive, "tracebacks": sum("Traceback" in line for line in log),
        }  # fmt: skip
    finally:
        proc.kill()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--listener", action="append", choices=sorted(PROBE_MECHANISM),
                        help="the kcoord listener(s) to storm (default both)")  # fmt: skip
    parser.add_argument("--per-minute", type=float, default=1000.0, help="failed logins a minute")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the storm lasts")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of idle probing first")
    parser.add_argument(
        "--settle", type=float, default=5.0, help="seconds after the storm before RSS is read"
    )
    parser.add_argument("--threads", type=int, default=8, help="attacker threads (Kafka delays each refusal)")
    args = parser.parse_args()
    listeners = args.listener or ["SASL_SSL", "SASL_PLAINTEXT"]
    folder = Path(tempfile.mkdtemp(prefix="kcoord-auth-storm-"))
    pki = make_pki(folder / "pki")
    kafka = KafkaBroker(log_dir=folder / "kafka", tls=pki, sasl=SaslUsers(USERS)).start()
    try:
        for listener in listeners:
            r = run(listener, kafka, pki, args)
            print(
                f"{listener} ({r['mechanism']}): {r['attempts']} failed logins in {r['storm_seconds']} s, "
                f"{r['refused']} answered 58, {r['closed']} closed, {r['other']} other; kcoord counted "
                f"{r['counted_by_kcoord']:.0f}, logged {r['failed_login_lines']} failed-login lines "
                f"({r['log_lines']} lines in all); RSS {r['rss_base_mib']} -> peak {r['rss_peak_mib']} -> "
                f"{r['rss_after_mib']} MiB; CPU {r['cpu_ms_per_login']} ms a login ({r['cpu_share']} of a core); "
                f"probe commit p50/p99 idle {r['commit_idle_p50_ms']}/{r['commit_idle_p99_ms']} ms, storm "
                f"{r['commit_storm_p50_ms']}/{r['commit_storm_p99_ms']} ms; fetch idle "
                f"{r['fetch_idle_p50_ms']}/{r['fetch_idle_p99_ms']} ms, storm "
                f"{r['fetch_storm_p50_ms']}/{r['fetch_storm_p99_ms']} ms; probe errors {len(r['probe_errors'])}",  # type: ignore[arg-type]
                flush=True,
            )
            print(json.dumps(r), flush=True)
    finally:
        kafka.stop()


if __name__ == "__main__":
    main()
