/**
 * Statuses of a build and of its steps and services, with Vela's names (`constants.Status*`).
 */

/**
 * Where a build, a step or a service stands.
 *
 * - `pending`: not started yet.
 * - `running`: started, not finished.
 * - `success`: finished with exit code 0 (a service: stopped by the executor at the build's end).
 * - `failure`: finished with a non-zero exit code; a build fails when a step without `continue` fails.
 * - `error`: could not run (image missing, pull failed, runtime unreachable, timeout of the build…).
 * - `canceled`: stopped because the build was cancelled (exit code 137 for a step that was running).
 * - `killed`: never reached because the build ended first (error or timeout), exit code 137, as Vela.
 * - `skipped`: its ruleset said not to run.
 */
export type Status = 'pending' | 'running' | 'success' | 'failure' | 'error' | 'canceled' | 'killed' | 'skipped';

/** The statuses that are final: once there, a build or a step never moves again. */
const FINAL_STATUSES: ReadonlySet<Status> = new Set<Status>(['success', 'failure', 'error', 'canceled', 'killed', 'skipped']);

/** True when `status` is final (see {@link FINAL_STATUSES}). */
export function isFinal(status: Status): boolean {
  return FINAL_STATUSES.has(status);
}

/** The exit code Vela reports for a container that was killed, cancelled or timed out (128 + SIGKILL). */
export const KILLED_EXIT_CODE = 137;

/**
 * The status of a step that exited with `exitCode`: `success` for 0, `failure` otherwise.
 * Whether the failure fails the build is the step's ruleset's `continue`.
 */
export function statusOfExit(exitCode: number): Status {
  return exitCode === 0 ? 'success' : 'failure';
}
