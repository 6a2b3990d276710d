#!/usr/bin/env bash
# Bring up a Docker engine for the container tests, or say why there is none.
#
#   ./scripts/docker_engine.sh        # exit 0: `docker info` answers; non-zero: the reason is on stderr
#
# An engine that already answers is used as it is. Otherwise, as root with apt-get: install Debian's
# docker.io (dockerd 20.10, API 1.41), docker-compose (compose v1.29: the v2 plugin is not packaged) and
# debootstrap (scripts/build_images.sh builds the base image with it: no image registry is reachable),
# then start dockerd in the background and wait until it answers.
#
# Client/daemon versions: a newer client (a 28.x /usr/local/bin/docker may come first in PATH)
# negotiates down to the daemon's API on its own; what must not happen is a pinned DOCKER_API_VERSION
# above the daemon's. The scripts and tests call Debian's /usr/bin/docker when it exists (see
# tests/support/docker_images.py), which matches the daemon it came with.
set -euo pipefail

log=${KCOORD_DOCKERD_LOG:-/var/log/kcoord-dockerd.log}
# Why there is no engine, for the tests' skip reasons (tests/support/containers.py reads it).
reason_file="$(cd "$(dirname "$0")/.." && pwd)/.cache/docker-engine.reason"
mkdir -p "$(dirname "$reason_file")" 2>/dev/null || true
rm -f "$reason_file" 2>/dev/null || true

fail() {
  echo "no Docker engine: $*" >&2
  echo "$*" 2>/dev/null >"$reason_file" || true
  exit 1
}

docker_cli() {
  if [ -x /usr/bin/docker ]; then echo /usr/bin/docker; else command -v docker || true; fi
}

answers() {
  local cli
  cli=$(docker_cli)
  [ -n "$cli" ] && timeout 10 "$cli" info >/dev/null 2>&1
}

if answers; then
  echo "docker engine: up ($($(docker_cli) version --format '{{.Server.Version}} API {{.Server.APIVersion}}'))"
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  fail "none answers and starting one needs root (running as uid $(id -u))"
fi
if ! command -v apt-get >/dev/null 2>&1; then
  fail "none answers and there is no apt-get to install one"
fi

need=()
[ -x /usr/sbin/dockerd ] || need+=(docker.io)
command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
  echo "docker engine: installing ${need[*]} (apt-get)"
  # With recommends, as tested: apparmor (hosts whose kernel enforces it), cgroupfs-mount (hosts
  # without cgroups mounted), debian-archive-keyring (debootstrap checks the release signature).
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      "${need[@]}" >/dev/null; }; then
    fail "apt-get could not install ${need[*]}"
  fi
fi

if ! pgrep -x dockerd >/dev/null 2>&1; then
  echo "docker engine: starting dockerd (log: $log)"
  # setsid + nohup: the daemon outlives this script and the test run that called it; it starts
  # its own containerd. overlay2 is the storage driver that works on this kernel.
  setsid nohup /usr/sbin/dockerd --storage-driver=overlay2 >"$log" 2>&1 </dev/null &
fi

for _ in $(seq 1 60); do
  if answers; then
    echo "docker engine: up ($($(docker_cli) version --format '{{.Server.Version}} API {{.Server.APIVersion}}'))"
    exit 0
  fi
  sleep 1
done
tail -n 15 "$log" >&2 || true
fail "dockerd did not answer within 60 s (its log: $log)"
