#!/usr/bin/env bash
# Install kcoord into .venv and run it on its embedded broker (or pass --bootstrap-server HOST:PORT).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
# Strict editable mode: the kcoord.* packages mapped from the repository's folders become a tree of
# links in build/ that type checkers read as they are (setup.py); a new module needs this re-run.
.venv/bin/pip install --quiet --disable-pip-version-check --config-settings editable_mode=strict -e .
exec .venv/bin/kcoord serve "$@"
