#!/usr/bin/env bash
# Makes sure a Docker engine answers. On Debian as root, installs docker.io with apt-get
# when dockerd is missing and starts dockerd in the background; elsewhere says what to do.
# Idempotent: returns at once when `docker info` already works.
set -euo pipefail
say() { printf '[docker-engine] %s\n' "$*"; }
engine_up() { docker info >/dev/null 2>&1; }

engine_up && exit 0

is_debian_root() { [ "$(id -u)" = 0 ] && [ -r /etc/debian_version ] && command -v apt-get >/dev/null; }

if ! command -v dockerd >/dev/null; then
  if is_debian_root; then
    say "installing Debian's docker.io with apt-get (no Docker engine here yet)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null || true
    apt-get install -y -qq --no-install-recommends docker.io >/dev/null
  else
    say "No Docker engine answers and dockerd is not installed."
    say "Install Docker Engine (on Debian/Ubuntu: sudo apt-get install docker.io), start it, and run again."
    exit 1
  fi
fi

if ! engine_up; then
  if [ "$(id -u)" != 0 ]; then
    say "dockerd is installed but no engine answers. Start it (sudo systemctl start docker) or add yourself to the docker group, then run again."
    exit 1
  fi
  # containerd is started by dockerd itself when not already running.
  mkdir -p /var/log
  say "starting dockerd in the background (log: /var/log/berth-dockerd.log)"
  nohup dockerd >/var/log/berth-dockerd.log 2>&1 &
  for _ in $(seq 1 60); do
    engine_up && break
    sleep 1
  done
fi

if ! engine_up; then
  say "dockerd did not answer within 60 s. Its last log lines:"
  tail -n 20 /var/log/berth-dockerd.log >&2 || true
  exit 1
fi
say "engine up: $(docker version --format 'server {{.Server.Version}}, API {{.Server.APIVersion}}' 2>/dev/null)"
