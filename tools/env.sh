# Sourced by the project's scripts: puts the project-local toolchain (installed by
# tools/bootstrap.sh into .tools/) first on PATH. Safe to source more than once.
BERTH_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export BERTH_ROOT
case ":$PATH:" in
  *":$BERTH_ROOT/.tools/bin:"*) ;;
  *) export PATH="$BERTH_ROOT/.tools/bin:$BERTH_ROOT/node_modules/.bin:$PATH" ;;
esac
# pnpm must not prompt or update itself in scripts.
export PNPM_HOME="$BERTH_ROOT/.tools/pnpm-home"
export npm_config_update_notifier=false
