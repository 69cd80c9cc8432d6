#!/usr/bin/env bash
# Builds Berth's local test images from Debian's busybox-static with `docker import`,
# only when they are missing. Nothing is pulled from a registry (none is reachable).
#
#   berth/busybox:1.35  a static busybox with every applet linked under /bin (sh, sleep, …)
#   berth/pause:1       PID 1 sleeps until SIGTERM (or SIGINT) and exits 0 on it
#
# Override the names with BERTH_BUSYBOX_IMAGE / BERTH_PAUSE_IMAGE.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../env.sh"
BUSYBOX_IMAGE="${BERTH_BUSYBOX_IMAGE:-berth/busybox:1.35}"
PAUSE_IMAGE="${BERTH_PAUSE_IMAGE:-berth/pause:1}"
say() { printf '[images] %s\n' "$*"; }

have() { docker image inspect "$1" >/dev/null 2>&1; }
if have "$BUSYBOX_IMAGE" && have "$PAUSE_IMAGE"; then exit 0; fi

cache="$BERTH_ROOT/.tools/images"
mkdir -p "$cache"
busybox="$cache/busybox"
if [ ! -x "$busybox" ]; then
  say "fetching Debian's busybox-static package"
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  if ! (cd "$work" && apt-get download busybox-static >/dev/null 2>&1); then
    apt-get update -qq >/dev/null 2>&1 || true
    (cd "$work" && apt-get download busybox-static >/dev/null) || {
      say "could not download busybox-static with apt-get: this needs Debian's package archive." >&2; exit 1; }
  fi
  dpkg-deb -x "$work"/busybox-static_*.deb "$work/root"
  cp "$work/root/bin/busybox" "$busybox"
  chmod 0755 "$busybox"
fi

# A root filesystem: /bin/busybox plus a link for every applet, /tmp, /etc basics.
make_rootfs() {
  local dir="$1"
  mkdir -p "$dir/bin" "$dir/tmp" "$dir/etc" "$dir/root" "$dir/proc" "$dir/sys" "$dir/dev"
  chmod 1777 "$dir/tmp"
  cp "$busybox" "$dir/bin/busybox"
  local applet
  for applet in $("$busybox" --list); do
    [ "$applet" = busybox ] || ln -sf busybox "$dir/bin/$applet"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$dir/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$dir/etc/group"
}

import() {
  local dir="$1" image="$2"; shift 2
  tar -C "$dir" -c . | docker import "$@" - "$image" >/dev/null
  say "built $image"
}

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

if ! have "$BUSYBOX_IMAGE"; then
  make_rootfs "$tmp/busybox"
  import "$tmp/busybox" "$BUSYBOX_IMAGE" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/bin/sh"]'
fi

if ! have "$PAUSE_IMAGE"; then
  make_rootfs "$tmp/pause"
  cat >"$tmp/pause/pause" <<'PAUSE'
#!/bin/sh
# Holds a pod's namespaces: sleeps until SIGTERM or SIGINT, then exits 0.
trap 'exit 0' TERM INT
while :; do
  sleep 3600 &
  wait $!
done
PAUSE
  chmod 0755 "$tmp/pause/pause"
  import "$tmp/pause" "$PAUSE_IMAGE" \
    --change 'ENV PATH=/bin' \
    --change 'ENTRYPOINT ["/pause"]'
fi
