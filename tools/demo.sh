#!/usr/bin/env bash
# Berth's main job, from a fresh clone: installs what is missing, then runs a pipeline file
# locally in containers with `berth exec` (default: examples/hello.yml).
#   bash tools/demo.sh [pipeline.yml] [berth exec flags…]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$BERTH_ROOT"
quiet() { "$@" | sed 's/^/  /'; }
quiet bash tools/bootstrap.sh
quiet bash tools/docker-engine.sh
quiet bash tools/images/build.sh
file="${1:-examples/hello.yml}"
[ $# -gt 0 ] && shift
exec node apps/worker/bin/berth.js exec "$file" "$@"
