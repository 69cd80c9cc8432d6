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
# The `berth` command an operator gets is the compiled bundle (apps/worker/README.md, "Compiled
# or from source"): ~30 MB less for `berth start` than the TypeScript sources. turbo's cache makes
# this quick once built; a source file changed since makes `berth` fall back to the sources.
echo '  building the berth command (pnpm build of @berth/worker and its packages)'
pnpm exec turbo run build --filter='@berth/worker...' --output-logs=errors-only >/dev/null
file="${1:-examples/hello.yml}"
[ $# -gt 0 ] && shift
exec node apps/worker/bin/berth.js exec "$file" "$@"
