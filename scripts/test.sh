#!/usr/bin/env bash
# The project's test command: installs everything it needs, then runs the linter, the type checker and the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
# A plain editable install: .venv points at src/, so a new module under src/kcoord/ needs no reinstall.
# [dev] = the suite's peers and the analytics pipeline ([test]) plus ruff and mypy, which run below.
.venv/bin/pip install --quiet --disable-pip-version-check -e '.[dev]'
# Byte-compile once: the generated message modules are ~2.5 MB of source, and with
# PYTHONDONTWRITEBYTECODE set (or a read-only checkout) every kcoord process would compile them again.
.venv/bin/python -m compileall -q src/kcoord >/dev/null
# kcat and promtool (Debian's prometheus, which checks and unit-tests deploy/prometheus/alerts.yml) are
# Debian packages; install them when we can (root + apt), otherwise their tests skip and say why.
debs=()
command -v kcat >/dev/null 2>&1 || debs+=(kcat)
command -v promtool >/dev/null 2>&1 || debs+=(prometheus)
if [ "${#debs[@]}" -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${debs[@]}" >/dev/null) || echo "note: could not install ${debs[*]}; their tests will be skipped"
fi
# The container images (a Docker engine, then a debootstrap'ed base and the images built on it) take
# minutes, mostly waiting on package downloads: build them in the background while the linters and the
# unit tests use the CPU, and wait for them before the integration tests, which need them. Started after
# the apt-get above, so the two never contend for dpkg's lock.
images_log=$(mktemp)
( ./scripts/docker_engine.sh && ./scripts/build_images.sh \
  || echo "note: no Docker engine or images (reason above); the container tests will be skipped" ) >"$images_log" 2>&1 &
images_pid=$!
images_ready() {
  wait "$images_pid" || true
  cat "$images_log"
  rm -f "$images_log"
}
.venv/bin/ruff check .
# One layout for all code: ruff format, applied once over the tree; a change that is not formatted fails here.
.venv/bin/ruff format --check .
# Type-check the whole package, strict ([tool.mypy] in pyproject.toml).
.venv/bin/mypy
if [ "$#" -gt 0 ]; then
  images_ready
  exec .venv/bin/pytest "$@"
fi
# The unit tests are pure and independent: they run on every core (pytest-xdist). The integration
# tests start brokers, kcoord processes and clients whose timing bounds assume the machine is theirs:
# they run one at a time afterwards. Both parts always run; the command fails if either does.
status=0
# By file: a module-scoped fixture (a Spark session) starts once, on one worker.
.venv/bin/pytest tests/unit -n auto --maxprocesses 4 --dist loadfile || status=$?
images_ready
.venv/bin/pytest tests --ignore=tests/unit || status=$?
exit "$status"
