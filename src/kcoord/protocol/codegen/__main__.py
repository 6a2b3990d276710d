"""``python -m kcoord.protocol.codegen``: write the generated modules; ``--check`` only reports stale ones."""

from __future__ import annotations

import argparse
import sys

from .modules import COMMAND, stale, write_all


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=COMMAND, description="Write kcoord/protocol/generated/ from protocol/schemas."
    )
    parser.add_argument("--check", action="store_true", help="only report stale files (exit 1 if any)")
    args = parser.parse_args(argv)
    if args.check:
        paths = stale()
        for p in paths:
            print(f"stale: {p} (run {COMMAND})", file=sys.stderr)
        return 1 if paths else 0
    for path in write_all():
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
