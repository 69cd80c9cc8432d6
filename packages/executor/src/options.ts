/** The executor's settings ({@link ExecutorOptions}) and its logger. */
import type { Container, RuleData, Build } from '@berth/pipeline';
import type { Runtime } from '@berth/runtime';
import type { RuntimeEventRouter } from './events.ts';
import type { BatchOptions } from './log/batcher.ts';
import type { LogLimits } from './log/cap.ts';
import type { Reporter } from './reporter.ts';
import type { SecretLoader } from './secrets.ts';

/** Where the executor writes what it does, for the worker's own log. All optional. */
export interface ExecutorLogger {
  debug?(message: string): void;
  info?(message: string): void;
  warn?(message: string): void;
}

/** Settings of the log path. */
export interface LogOptions extends BatchOptions {
  /** The per-container size cap (16 MiB, the last 1 MiB kept as tail, by default). */
  limits?: LogLimits;
}

/** Settings of {@link Executor}. */
export interface ExecutorOptions {
  /** The compiled pipeline, with ids set (`prepareBuild`). The executor works on a copy. */
  build: Build;
  /** The runtime the containers run on. */
  runtime: Runtime;
  /** Where status and logs go. Default: nowhere. */
  reporter?: Reporter;
  /** The build timeout: create, plan, assemble and exec must end within it. Default 30 min. */
  timeoutMs?: number;
  /**
   * How long log streams go on once the build was cancelled, so the last lines still arrive
   * (Vela's log-streaming timeout). Default 60 s.
   */
  logStreamingGraceMs?: number;
  /**
   * The budget of each step of destroyBuild, whatever happened before: removing the containers
   * (each in its own budget, in parallel), waiting for a container's log stream, removing the
   * volume, the network and the runtime build. Its runtime calls end within 6 budgets (inspect,
   * remove and stream wait of the containers, then volume, network, build). Default 2 min.
   */
  cleanupTimeoutMs?: number;
  /**
   * What rulesets are matched against (branch, event, repo, tag, target…); the status comes from
   * the build as it runs.
   */
  ruleData?: Omit<RuleData, 'status' | 'env'>;
  /** Loads the value of each secret of the build; default: the secret's `value` as given. */
  loadSecret?: SecretLoader;
  /**
   * Variables laid over each container's environment before its secrets, as Vela's worker lays
   * the build's and the repo's variables (`VELA_BUILD_*`, `VELA_REPO_*`) as they are when the
   * build runs. Called once per container.
   */
  environment?: (container: Container) => Readonly<Record<string, string>>;
  /** The log path's settings. */
  logs?: LogOptions;
  /** Routes the runtime's pull progress and notices to this build's reporter. */
  events?: RuntimeEventRouter;
  /** The worker's host name, for the init log and `VELA_HOST`. Default `os.hostname()`. */
  host?: string;
  /** The worker's version, for the init log and `VELA_VERSION`. */
  version?: string;
  /**
   * Vela's outputs (on in Vela when `VELA_EXECUTOR_OUTPUTS_IMAGE` is set): what a step writes to
   * `/vela/outputs/*.env` becomes environment (and `${KEY}` in the image) of the steps after it.
   * Needs a runtime with the `outputs` capability; without one, a build whose images need outputs
   * is refused at its start. Default false.
   */
  outputs?: boolean;
  /**
   * When the build's final status is recorded and reported (the end of `executor.status`'s
   * `running`, the reporter's last `buildStatus`):
   *
   * - `'destroy-end'` (default): at the end of destroyBuild, once every container, the volume and
   *   the network are removed and every step's final status and log were reported. `berth exec`'s
   *   console prints its summary then, after every step's result.
   * - `'exec-end'`: when execBuild returns (succeeded, failed, cancelled or timed out), before the
   *   log streams are drained and the build is destroyed, as go-vela/worker does:
   *   executor/linux/build.go ExecBuild defers `build.Upload` (internal/build/upload.go), and
   *   cmd/vela-worker/exec.go runs DestroyBuild after ExecBuild returned (deferred). destroyBuild
   *   then still reports the final status of the containers it stops (services, detached steps,
   *   steps not reached), as Vela's DestroyStep and DestroyService do after the build's upload; it
   *   does not report the build again. A build whose execBuild never ran (create, plan or
   *   assemble failed) is reported at the end of destroyBuild as with `'destroy-end'`.
   *
   * Gotcha: with `'exec-end'` the build is final while logs may still arrive and containers still
   * exist; wait for runBuild (or destroyBuild) to know the build's resources are gone.
   */
  finalBuildStatusAt?: 'exec-end' | 'destroy-end';
  logger?: ExecutorLogger;
}
