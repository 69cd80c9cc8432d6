/**
 * runBuild: one build's whole lifecycle, in the right contexts.
 */
import type { Context } from '@berth/context';
import { messageOf } from './errors.ts';
import { Executor, type ExecutorOptions } from './executor.ts';
import type { BuildReport, StepReport } from './reporter.ts';
import type { Status } from './status.ts';

/** Settings of {@link runBuild}: the executor's, and a hook to reach the executor while it runs. */
export interface RunBuildOptions extends ExecutorOptions {
  /** Called with the executor before the build starts: keep it to call `cancelBuild`. */
  onStart?: (executor: Executor) => void;
}

/** How a build ended. */
export interface BuildResult {
  status: Status;
  build: BuildReport;
  /** The init step, services and steps, in pipeline order. */
  steps: StepReport[];
}

/**
 * Runs a build from start to end and returns how it ended; never rejects for a failing build.
 *
 * The contexts are those of ARCHITECTURE.md: a build ctx under `ctx` (cancelling `ctx` or calling
 * `executor.cancelBuild()` cancels the build); create, plan, assemble and exec under the exec ctx
 * (the build timeout); streamBuild under the stream ctx (the log-streaming grace after a cancel);
 * destroyBuild under the destroy ctx (not cancelled with the build, bounded by the cleanup limit).
 * When exec returns (success, failure, timeout or cancel) the build ctx ends, so log streams get
 * the log-streaming grace from then on and no longer: streams of containers that ended are
 * drained within it before destroy starts; services are stopped by destroyBuild, which ends their
 * streams, so a service that keeps logging does not hold the build up.
 */
export async function runBuild(ctx: Context, options: RunBuildOptions): Promise<BuildResult> {
  const executor = new Executor(options);
  const contexts = executor.contexts(ctx);
  options.onStart?.(executor);
  const streaming = executor.streamBuild(contexts.stream);
  try {
    try {
      await executor.createBuild(contexts.exec);
      await executor.planBuild(contexts.exec);
      await executor.assembleBuild(contexts.exec);
      await executor.execBuild(contexts.exec);
    } catch (error) {
      options.logger?.debug?.(`build ${executor.build.id} stopped: ${messageOf(error)}`);
    }
    // The build's containers are done: as go-vela/worker cancels the build ctx when ExecBuild
    // returns (cmd/vela-worker/exec.go), the log-streaming grace starts now, in every path, so a
    // log stream that never ends is cut one grace later (executor/linux/build.go, StreamBuild).
    contexts.end();
    await executor.waitForStreams(contexts.stream);
    await executor.destroyBuild(contexts.destroy());
    await streaming;
  } finally {
    contexts.release();
  }
  return { status: executor.status, build: executor.report(), steps: executor.steps() };
}
