#!/usr/bin/env bash
# Install kcoord into .venv and run it on its embedded broker (or pass --bootstrap-server HOST:PORT).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
# Only what serving needs (no test peers, no PySpark); a plain editable install that points at src/.
.venv/bin/pip install --quiet --disable-pip-version-check -e .
# Byte-compile once: the generated message modules are ~2.5 MB of source, and with
# PYTHONDONTWRITEBYTECODE set (or a read-only checkout) every kcoord process would compile them again.
.venv/bin/python -m compileall -q src/kcoord >/dev/null
exec .venv/bin/kcoord serve "$@"
