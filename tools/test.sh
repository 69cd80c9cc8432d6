#!/usr/bin/env bash
# Berth's test command (the README's): installs what is missing, then checks and tests every package.
#
#   1. bootstrap: Node 24, pnpm, dependencies       (tools/bootstrap.sh)
#   2. a Docker engine that answers                  (tools/docker-engine.sh)
#   3. the local test images                         (tools/images/build.sh)
#   4. a Redis server for the worker's queue tests    (tools/redis.sh)
#   5. a real single-node Kubernetes cluster          (tools/kube-cluster; the first run on a machine
#      builds its binaries from the Go module proxy: about 5–10 minutes on 2 cores, then cached)
#   6. the build (turbo, cached): every package's dist/ and the compiled `berth` command, which
#      bin/berth.js then runs while it is fresh (its tests cover the source fallback too)
#   7. the worker image (tools/ship/image.sh), which tools/fleet runs in the cluster and tools/ship
#      with Docker, built in the background during steps 8 and 9
#   8. with the real cluster and no package filters, the cluster lane starts (step 10): beside the
#      checks, as it is the longer lane (~770 s against the local lane's ~630 s)
#   9. at once, each on its own: the dependency-boundary check (tools/deps), formatting (prettier),
#      unused code (knip), typecheck and lint (the workspace as one program: `pnpm typecheck`,
#      `pnpm lint`; with package filters, those packages' own through turbo)
#  10. every package's tests, each writing a JSON report, in two lanes at once:
#      - the cluster lane: the packages whose tests use the real cluster (those that depend on
#        @berth/kube-cluster), BERTH_TEST_CLUSTER_CONCURRENCY (default 1: with the local lane
#        beside it, two more test processes made the real-cluster timings flake) at a time,
#        tools/fleet last, once the worker image is built;
#      - the local lane, once the checks are done: every other package but the light ones below
#        (Docker, kube-sim, Redis, npm), BERTH_TEST_LOCAL_CONCURRENCY (default 1) at a time, and the
#        files of a split package (runtime-kubernetes) that do not use the real cluster;
#        BERTH_TEST_WORKERS (default 2) of a package's test files at once (vitest.shared.ts). Those
#        files mostly wait on Docker, kube-sim and child processes: two at once took kube-sim's
#        tests from 264 s to 126 s, the worker's from ~390 s to ~160 s, runtime-kubernetes' local
#        files from 247 s to 127 s.
#      The cluster lane then runs the two cases that need the cluster alone (log rotation, the
#      apiserver restarted), once runtime-kubernetes' local files (the local lane's first) are done,
#      and beside them the light packages (no Docker, kube-sim, Redis or cluster), two at once,
#      then runtime-docker; then it stops the cluster.
#      The totals end the output: `tests: N passed, N failed[, N skipped]`, after each package's
#      time and the slowest files.
#
# Exits non-zero when any step fails, any test fails, or no test ran.
# Pass package filters to test fewer packages: tools/test.sh --filter @berth/context
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$BERTH_ROOT"
export TURBO_TELEMETRY_DISABLED=1 DO_NOT_TRACK=1 TURBO_NO_UPDATE_NOTIFIER=1
started=$(date +%s)
# Each step's time, printed before the summary ("where the time went"): the step's name up to " (".
step_times=() step_name="" step_at=$started
step() {
  local now
  now=$(date +%s)
  [ -n "$step_name" ] && step_times+=("${step_name%% (*} $((now - step_at)) s")
  step_name=$* step_at=$now
  printf '\n==> %s\n' "$*"
}

step "bootstrap (Node 24, pnpm, dependencies)"
bash tools/bootstrap.sh || { echo "bootstrap failed: see the lines above" >&2; exit 1; }
step "Docker engine"
bash tools/docker-engine.sh || exit 1
step "test images"
bash tools/images/build.sh || exit 1
if [ -f tools/redis.sh ]; then
  step "Redis"
  bash tools/redis.sh || exit 1
fi

failed_steps=()
# The real cluster: its lane (runtime-kubernetes conformance, the executor's matrix) is required, so a
# cluster that cannot start fails those tests with the reason rather than skipping them. A cluster
# this command started is stopped before the summary; one that was running already is left running.
step "real Kubernetes cluster (tools/kube-cluster)"
export BERTH_REAL_CLUSTER=required
cluster_started=false
if bash tools/kube-cluster/cluster.sh running; then
  echo "[kube-cluster] already running: left running afterwards"
else
  cluster_started=true
  trap 'bash tools/kube-cluster/cluster.sh stop; exit 130' INT TERM
fi
if bash tools/kube-cluster/cluster.sh start; then
  export "$(bash tools/kube-cluster/cluster.sh env | sed 's/^KUBECONFIG=/BERTH_REAL_KUBECONFIG=/')"
else
  failed_steps+=("real Kubernetes cluster: it did not start (see the \"real Kubernetes cluster\" step)")
fi

step "build (compiled JavaScript for the berth command)"
pnpm exec turbo run build --output-logs=errors-only "$@" || failed_steps+=("build")

# The worker image builds in the background, beside the checks and the cluster lane's first
# packages: its own turbo build is then all cache hits, and the checks read the sources, never dist/
# or the image's build context. tools/fleet (in the cluster lane) runs it in the cluster, once it is
# built; tools/ship (in the local lane) runs it with Docker.
step "worker image (tools/ship/image.sh): building in the background"
image_log="$(mktemp)" image_built="$(mktemp -u)"
(
  bash tools/ship/image.sh >"$image_log" 2>&1
  status=$?
  echo "$status" >"$image_built"
  exit "$status"
) &
image_job=$!

export BERTH_TEST_REPORT_DIR="$BERTH_ROOT/.reports/vitest"
rm -rf "$BERTH_TEST_REPORT_DIR" && mkdir -p "$BERTH_TEST_REPORT_DIR"
# The packages whose tests use the real cluster depend on @berth/kube-cluster (realCluster()). One
# whose vitest.config.ts names its realClusterFiles (vitest.shared.ts) runs in both lanes: those
# files in the cluster lane, the others in the local lane (BERTH_TEST_LANE).
# The packages that run beside the alone cases (the tail group): those that use neither the cluster,
# kube-sim, Docker (dockerode, runtime-docker) nor Redis, and after them runtime-docker's own tests
# (Docker only, no cluster): with log rotation at 2 rotated runs the cluster lane's tail got
# shorter than the local lane by about as much as they take.
cluster_filters=() local_filters=() tail_filters=() tail_after_filters=()
while read -r name kind; do
  case $kind in
    cluster | split)
      cluster_filters+=("--filter=$name")
      [ "$kind" = split ] || local_filters+=("--filter=!$name")
      ;;
    tail | tail-after)
      if [ "$kind" = tail ]; then tail_filters+=("--filter=$name"); else tail_after_filters+=("--filter=$name"); fi
      local_filters+=("--filter=!$name")
      ;;
  esac
done < <(node -e '
  const { existsSync, readFileSync, readdirSync } = require("node:fs");
  const heavy = ["@berth/kube-cluster", "@berth/kube-sim", "@berth/runtime-docker", "dockerode", "ioredis"];
  // Docker-only, ~100 s: in the tail group, after the light packages, it evens the lanes out (the
  // local lane was the longer). Beside them, a fresh-clone run failed the 1 s
  // cancellation bound of runtime-dummy (1.8 s): its in-process runtime starved of CPU.
  const tailAfter = ["@berth/runtime-docker"];
  for (const dir of ["apps", "packages", "tools"])
    for (const pkg of readdirSync(dir)) {
      let m;
      try { m = JSON.parse(readFileSync(`${dir}/${pkg}/package.json`, "utf8")); } catch { continue; }
      const deps = { ...m.dependencies, ...m.devDependencies };
      if (m.name === "@berth/kube-cluster" || "@berth/kube-cluster" in deps) {
        const config = `${dir}/${pkg}/vitest.config.ts`;
        console.log(m.name, existsSync(config) && readFileSync(config, "utf8").includes("realClusterFiles") ? "split" : "cluster");
      } else if (tailAfter.includes(m.name)) console.log(m.name, "tail-after");
      else if (m.name !== "@berth/tool-ship" && !heavy.some((d) => d in deps)) console.log(m.name, "tail");
      else console.log(m.name, "local");
    }')
# With the real cluster and no package filters, the tests run in two lanes (the header, step 10).
lanes=false
[ $# -eq 0 ] && [ -n "${BERTH_REAL_KUBECONFIG:-}" ] && [ ${#cluster_filters[@]} -gt 0 ] && lanes=true
# The package of the cluster lane that runs the worker image: after the others, once it is built.
image_filter=--filter=@berth/fleet

if $lanes; then
  # The cluster lane starts at once, beside the checks (about a minute of them on both cores), and
  # runs in the background, in its own process group (stopped with the command). Its packages
  # mostly wait on the cluster; the lane is the test run's longest (about 770 s in the last
  # fresh-clone runs, against the local lane's 630 s), so it starts first.
  # After its packages, it runs the two real-cluster cases that need the cluster alone: twenty-odd
  # 50 MiB logs through the one kubelet (log rotation), and the apiserver restarted mid-build, which
  # takes the whole cluster's API away for seconds. They wait for runtime-kubernetes' local files
  # too, which the local lane runs first: those carry every log byte of their kube-sim cases in the
  # test's process, and beside the alone cases a fresh-clone run failed the 50 MiB case's memory
  # bound and a kube-sim rotation case. Their reports: berth__runtime-kubernetes.alone.json and
  # .alone.files.json (vitest.shared.ts).
  # Beside the alone cases it runs the tail group (above), two packages at once: 7 light packages,
  # ~40 s of tests and ~30 s of vitest start-ups, then runtime-docker (~100 s); they had been in the
  # local lane. Then it stops
  # the cluster it started, while the local lane may still run.
  step "tests: the cluster lane starts, beside the checks"
  tests_started=$(date +%s)
  rk_local_done="$(mktemp -u)" cluster_stopped="$(mktemp -u)"
  set -m
  (
    cluster_turbo() {
      BERTH_TEST_LANE=cluster pnpm exec turbo run test --continue --concurrency="${BERTH_TEST_CLUSTER_CONCURRENCY:-1}" --log-order=grouped --ui=stream "$@"
    }
    cluster_turbo "${cluster_filters[@]}" "--filter=!${image_filter#--filter=}"
    status=$?
    if printf '%s\n' "${cluster_filters[@]}" | grep -qx -- "$image_filter"; then
      while [ ! -e "$image_built" ]; do sleep 2; done
      if [ "$(cat "$image_built")" = 0 ]; then
        cluster_turbo "$image_filter" || status=1
      else
        echo "[tests] ${image_filter#--filter=} not run: the worker image did not build (see the \"worker image\" step)"
        status=1
      fi
    fi
    echo "[tests] cluster lane done after $(($(date +%s) - tests_started)) s"
    tail_group=true
    if [ $((${#tail_filters[@]} + ${#tail_after_filters[@]})) -gt 0 ]; then
      (
        tail_turbo() { BERTH_TEST_WORKERS="${BERTH_TEST_WORKERS:-2}" pnpm exec turbo run test --continue --concurrency=2 --log-order=grouped --ui=stream "$@"; }
        tail_status=0
        [ ${#tail_filters[@]} -eq 0 ] || tail_turbo "${tail_filters[@]}" || tail_status=1
        [ ${#tail_after_filters[@]} -eq 0 ] || tail_turbo "${tail_after_filters[@]}" || tail_status=1
        exit $tail_status
      ) &
      tail_group=$!
    fi
    while [ ! -e "$rk_local_done" ]; do sleep 2; done
    # Log rotation runs 50 MiB logs until 2 were rotated while read (the file's default is 3; about
    # half the runs are, each ~23 s): ~4 runs instead of ~6, and fewer when the machine is slow.
    rotated_runs="${ROTATION_ROTATED_RUNS:-2}"
    step "real Kubernetes cluster, alone: log rotation (50 MiB logs until $rotated_runs rotated while read), the apiserver restarted mid-build (SIGTERM, SIGKILL); beside them, the light packages and runtime-docker"
    (cd packages/runtime-kubernetes && ROTATION_ROTATED_RUNS="$rotated_runs" BERTH_TEST_LANE=alone BERTH_REAL_CLUSTER_ALONE=1 pnpm exec vitest run --no-file-parallelism \
      test/log-rotation-real.test.ts test/apiserver-restart-real.test.ts) || status=1
    [ "$tail_group" = true ] || wait "$tail_group" || status=1
    echo "[tests] cluster lane, its alone cases and the tail group done after $(($(date +%s) - tests_started)) s"
    if $cluster_started; then
      bash tools/kube-cluster/cluster.sh stop && echo stopped >"$cluster_stopped" || echo "did not stop" >"$cluster_stopped"
    fi
    exit $status
  ) </dev/null &
  cluster_lane=$!
  set +m
  trap 'kill -TERM -- -"$cluster_lane" 2>/dev/null; rm -f "$rk_local_done" "$image_built"; $cluster_started && bash tools/kube-cluster/cluster.sh stop; exit 130' INT TERM
fi

# The checks read the sources only, each on one core: they run at once, each into its own log,
# printed in this order when all are done. Without package filters, typecheck and lint check the
# whole workspace as one program (the root tsconfig.json, eslint.workspace.config.js: 11 s and 25 s
# on 2 cores, where every package's own typecheck and lint took 62 s and 80 s); with filters, the
# filtered packages' own (turbo).
step "checks: dependency boundaries, formatting, unused code, typecheck and lint, at once"
checks_dir="$(mktemp -d)"
checks=() check_pids=()
check() {
  local out="$checks_dir/${#checks[@]}" at=$SECONDS
  checks+=("$1|$2")
  shift 2
  ("$@" >"$out.log" 2>&1; echo $? >"$out.status"; echo $((SECONDS - at)) >"$out.time") &
  check_pids+=($!)
}
check "dependency boundaries" "dependency boundaries" node tools/deps/src/cli.ts
check "formatting (prettier)" 'formatting: run `pnpm format`' pnpm exec prettier --check --log-level=warn "**/*.{ts,js,mjs,json}"
check "unused files, exports and dependencies (knip)" "unused code (knip)" pnpm exec knip --no-progress --no-config-hints
if [ $# -gt 0 ]; then
  check "typecheck and lint" "typecheck/lint" pnpm exec turbo run typecheck lint --output-logs=errors-only "$@"
else
  check "typecheck (the workspace as one program)" "typecheck: run \`pnpm typecheck\`" pnpm run --silent typecheck
  check "lint (the workspace as one program)" "lint: run \`pnpm lint\`" pnpm run --silent lint
fi
wait "${check_pids[@]}"
for i in "${!checks[@]}"; do
  printf -- '--- %s (%s s)\n' "${checks[$i]%%|*}" "$(cat "$checks_dir/$i.time")"
  cat "$checks_dir/$i.log"
  [ "$(cat "$checks_dir/$i.status")" = 0 ] || failed_steps+=("${checks[$i]#*|}")
done
rm -rf "$checks_dir"

step "worker image (tools/ship/image.sh)"
if wait "$image_job"; then
  # tools/ship's image test then runs this image rather than building it again.
  export BERTH_WORKER_IMAGE_BUILT=1
else
  failed_steps+=("worker image: tools/fleet and tools/ship cannot run without it")
fi
cat "$image_log" && rm -f "$image_log"

step "tests"
local_started=$(date +%s)
if ! $lanes; then
  tests_started=$local_started
  pnpm exec turbo run test --continue --concurrency=2 --log-order=grouped "$@"
  test_status=$?
else
  local_lane() {
    BERTH_TEST_LANE=local BERTH_TEST_WORKERS="${BERTH_TEST_WORKERS:-2}" pnpm exec turbo run test --continue --concurrency="${BERTH_TEST_LOCAL_CONCURRENCY:-1}" --log-order=grouped --ui=stream "$@"
  }
  test_status=0
  local_lane --filter=@berth/runtime-kubernetes || test_status=1
  touch "$rk_local_done"
  local_lane "${local_filters[@]}" --filter=!@berth/runtime-kubernetes || test_status=1
  echo "[tests] local lane done after $(($(date +%s) - local_started)) s"
  wait "$cluster_lane" || test_status=1
  rm -f "$rk_local_done" "$image_built"
  if [ -e "$cluster_stopped" ]; then
    [ "$(cat "$cluster_stopped")" = stopped ] || failed_steps+=("stopping the real Kubernetes cluster (after the cluster lane)")
    cluster_started=false
    rm -f "$cluster_stopped"
  fi
  if $cluster_started; then trap 'bash tools/kube-cluster/cluster.sh stop; exit 130' INT TERM; else trap - INT TERM; fi
fi
echo "[tests] $(($(date +%s) - tests_started)) s"

# Unless the cluster lane stopped it already.
if $cluster_started; then
  step "stopping the real Kubernetes cluster"
  bash tools/kube-cluster/cluster.sh stop || failed_steps+=("stopping the real Kubernetes cluster")
  trap - INT TERM
fi

step_times+=("${step_name%% (*} $(($(date +%s) - step_at)) s")
printf '\nwhere the time went: %s' "${step_times[0]}"
printf '; %s' "${step_times[@]:1}"
echo
node tools/test-summary.ts "$BERTH_TEST_REPORT_DIR" "$test_status" "$(( $(date +%s) - started ))" "${failed_steps[@]}"
