#!/usr/bin/env bash
# Build every image the Dockerfile and compose files name, locally (no image registry is reachable):
# a debootstrap'ed Debian base, stand-ins tagged python:3.11-slim, apache/kafka:4.0.0 and
# prom/prometheus:v2.55.1, then kcoord:latest from ./Dockerfile. Each is labelled with a hash of its
# inputs and skipped when that image exists, so a second run takes seconds.
# Needs a Docker engine (scripts/docker_engine.sh) and, for the base, root and debootstrap.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 -m tests.support.docker_images "$@"
