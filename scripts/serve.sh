#!/usr/bin/env bash
# Install kcoord into .venv and run it on its embedded broker (or pass --bootstrap-server HOST:PORT).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
# Only what serving needs (no test peers, no PySpark); a plain editable install that points at src/.
.venv/bin/pip install --quiet --disable-pip-version-check -e .
exec .venv/bin/kcoord serve "$@"
