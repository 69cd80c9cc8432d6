/**
 * @berth/executor: runs one Vela build on any Berth runtime — lifecycle, contexts, log
 * streaming with secret masking and size caps, and status and log reporting.
 *
 * @packageDocumentation
 */
export { type Status, FINAL_STATUSES, isFinal, KILLED_EXIT_CODE, statusOfExit } from './status.ts';
export { type BuildReport, type Reporter, type StepReport, type Target, type TargetKind, combineReporters, nullReporter } from './reporter.ts';
export { MASK, maskText, SecretMasker } from './log/masker.ts';
export { DEFAULT_MAX_LOG_BYTES, formatBytes, LogCap, type LogLimits } from './log/cap.ts';
export { type BatchOptions, DEFAULT_BATCH_BYTES, DEFAULT_FLUSH_INTERVAL_MS, LogBatcher } from './log/batcher.ts';
export { type LogDestination, LogWriter, type LogWriterOptions, pumpLog } from './log/log-writer.ts';
export { ExecutorError, type Phase } from './errors.ts';
export { type RuntimeEventHandler, RuntimeEventRouter } from './events.ts';
export {
  type BuildContexts,
  Executor,
  type ExecutorLogger,
  type ExecutorOptions,
  formatDuration,
  type LogOptions,
  type StreamRequest,
} from './executor.ts';
export type { LoadedSecret, SecretLoader } from './secrets.ts';
export { type BuildResult, runBuild, type RunBuildOptions } from './run-build.ts';
export { ConsoleReporter, type ConsoleReporterOptions } from './console-reporter.ts';
