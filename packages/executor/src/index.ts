/**
 * @berth/executor: runs one Vela build on any Berth runtime — lifecycle, contexts, log
 * streaming with secret masking and size caps, and status and log reporting.
 *
 * The index exports what other packages use (and the types their signatures name); the log path
 * (masker, cap, batcher, writer) is internal.
 *
 * @packageDocumentation
 */
export { isFinal, type Status } from './status.ts';
export { type BuildReport, type Reporter, type StepReport, type Target, type TargetKind, combineReporters, nullReporter } from './reporter.ts';
export { formatBytes, type LogLimits } from './log/cap.ts';
export type { BatchOptions } from './log/batcher.ts';
export { ExecutorError, type Phase } from './errors.ts';
export { type RuntimeEventHandler, RuntimeEventRouter } from './events.ts';
export type { BuildContexts } from './build/contexts.ts';
export { Executor, type ExecutorLogger, type ExecutorOptions, type LogOptions, type StreamRequest } from './executor.ts';
export type { LoadedSecret, SecretLoader } from './secrets.ts';
export { type BuildResult, runBuild, type RunBuildOptions } from './run-build.ts';
