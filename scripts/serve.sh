#!/usr/bin/env bash
# Install kcoord into .venv and run it on its embedded broker (or pass --bootstrap-server HOST:PORT).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -e .
exec .venv/bin/kcoord serve "$@"
