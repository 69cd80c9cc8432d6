#!/usr/bin/env bash
# Builds the worker image (apps/worker/deploy/docker/Dockerfile) without a registry:
#
#   1. a base image `berth/node-base:24`, made locally with `docker import` from the project's
#      Node 24 (the npm registry's build, in .tools/), the shared libraries it links and Debian's
#      busybox-static for a shell — only when missing;
#   2. the build context: the workspace packages built to dist/ (turbo) and a production
#      `pnpm deploy` of @berth/worker;
#   3. `docker build --build-arg BASE=berth/node-base:24`, tagged BERTH_WORKER_IMAGE
#      (default berth/worker:dev).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../env.sh"
cd "$BERTH_ROOT"
BASE_IMAGE="${BERTH_NODE_BASE_IMAGE:-berth/node-base:24}"
WORKER_IMAGE="${BERTH_WORKER_IMAGE:-berth/worker:dev}"
say() { printf '[image] %s\n' "$*"; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

bash tools/images/build.sh
# The static busybox of the local test image gives the base image its shell.
busybox="$tmp/busybox"
bb="$(docker create "${BERTH_BUSYBOX_IMAGE:-berth/busybox:1.35}" /bin/true)"
docker cp -L "$bb:/bin/busybox" "$busybox" >/dev/null
docker rm "$bb" >/dev/null

if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  say "making $BASE_IMAGE from .tools' Node $(node --version) and Debian's busybox-static"
  root="$tmp/base"
  node_bin="$(readlink -f "$(command -v node)")"
  mkdir -p "$root/bin" "$root/usr/local/bin" "$root/tmp" "$root/etc" "$root/var/lib/berth" "$root/workspace" "$root/proc" "$root/sys" "$root/dev"
  chmod 1777 "$root/tmp"
  cp "$busybox" "$root/bin/busybox"
  for applet in $("$busybox" --list); do [ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"; done
  cp "$node_bin" "$root/usr/local/bin/node"
  # Node's shared libraries and the dynamic loader, at the paths it was linked with.
  for lib in $(ldd "$node_bin" | grep -o '/[^ ]*'); do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nberth:x:10001:10001:berth:/workspace:/bin/sh\n' >"$root/etc/passwd"
  printf 'root:x:0:\nberth:x:10001:\n' >"$root/etc/group"
  chown 10001:10001 "$root/var/lib/berth" "$root/workspace"
  tar -C "$root" -c . | docker import -c 'ENV PATH=/usr/local/bin:/bin' - "$BASE_IMAGE" >/dev/null
  say "built $BASE_IMAGE"
fi

say "building the packages and a production deploy of @berth/worker"
pnpm exec turbo run build --filter='@berth/worker...' --output-logs=errors-only >/dev/null
pnpm --filter @berth/worker deploy --prod --legacy "$tmp/context" >/dev/null
say "docker build $WORKER_IMAGE"
docker build -q --build-arg "BASE=$BASE_IMAGE" -f apps/worker/deploy/docker/Dockerfile -t "$WORKER_IMAGE" "$tmp/context" >/dev/null
say "built $WORKER_IMAGE ($(docker image inspect -f '{{.Size}}' "$WORKER_IMAGE" | awk '{printf "%d MB", $1/1e6}'))"
