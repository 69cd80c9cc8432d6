/**
 * The status rules of a build, as go-vela/worker applies them (executor/linux/build.go,
 * step.go, service.go), pure: facts in, statuses and messages out. The Executor records the facts
 * and applies the results.
 */
import { isFinal, KILLED_EXIT_CODE, type Status, statusOfExit } from '../status.ts';

/** Why running work stopped when its ctx ended. */
export type Interruption = 'canceled' | 'timeout' | 'stopped';

/** What is known when work under a ctx stopped because the ctx ended. */
export interface InterruptionFacts {
  /** The build was cancelled before (cancelBuild, or recorded earlier). */
  readonly canceled: boolean;
  /** The build ctx was cancelled by its parent or cancelBuild (not ended by the executor). */
  readonly buildCanceled: boolean;
  /** The ctx, or the exec ctx, passed its deadline (the build timeout). */
  readonly deadline: boolean;
  /** The exec ctx was cancelled (a caller driving its own contexts cancelled it). */
  readonly execCanceled: boolean;
}

/**
 * Why work stopped: a cancel wins over the timeout (a build cancelled after its deadline passed is
 * canceled); a ctx that ended for neither (another stage failed and the task group stopped the
 * others) is `stopped`.
 */
export function interruptionOf(facts: InterruptionFacts): Interruption {
  if (facts.canceled || facts.buildCanceled) return 'canceled';
  if (facts.deadline) return 'timeout';
  if (facts.execCanceled) return 'canceled';
  return 'stopped';
}

/** `1h 2m 3s`, `2.5s`, `150ms`. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)}s`;
  const s = Math.round(ms / 1000);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const rest = s % 60;
  return [h > 0 ? `${h}h` : '', m > 0 ? `${m}m` : '', rest > 0 ? `${rest}s` : ''].filter(Boolean).join(' ');
}

/** The build's error when it timed out. */
export function timeoutMessage(timeoutMs: number): string {
  return `the build timed out after ${formatDuration(timeoutMs)}`;
}

/** A container's final status, exit code and error. */
export interface Outcome {
  readonly status: Status;
  readonly exitCode?: number;
  readonly error?: string;
}

/**
 * A running container stopped by an interruption: canceled (137) on a cancel; failure (137) on the
 * timeout (Vela fails the step that was running); killed (137) when another stage stopped it.
 */
export function interruptedOutcome(why: Interruption, timeoutMs: number): Outcome {
  if (why === 'canceled') return { status: 'canceled', exitCode: KILLED_EXIT_CODE, error: 'the build was canceled' };
  if (why === 'timeout') return { status: 'failure', exitCode: KILLED_EXIT_CODE, error: timeoutMessage(timeoutMs) };
  return { status: 'killed', exitCode: KILLED_EXIT_CODE, error: 'stopped: another stage of the build could not complete' };
}

/** What destroyBuild knows of a container whose status is not final yet. */
export interface UnfinishedRun {
  readonly status: Status;
  /** runContainer resolved. */
  readonly ran: boolean;
  /** The container has ended (waitContainer, or an inspect in destroy). */
  readonly exited: boolean;
  readonly exitCode: number;
}

/** What destroyBuild knows of the build. */
export interface BuildFacts {
  readonly canceled: boolean;
  readonly timedOut: boolean;
  /** The build errored (a phase failed). */
  readonly errored: boolean;
  readonly timeoutMs: number;
}

/**
 * The final outcome destroyBuild gives a container that has none yet (`how` it came to it);
 * `undefined` for one that is final. Vela: a service or detached step still running when the build ended succeeded (the
 * executor stopped it), one that exited reports its exit code; a running one is interrupted on a
 * cancel; a step never reached is canceled (cancel), killed (error or timeout) or skipped.
 */
export function unfinishedOutcome(run: UnfinishedRun, build: BuildFacts): (Outcome & { how: 'ended' | 'interrupted' | 'not-reached' }) | undefined {
  if (isFinal(run.status)) return undefined;
  if (run.status === 'running' && run.ran && (run.exited || !build.canceled)) {
    const status = statusOfExit(run.exitCode);
    return { how: 'ended', status, exitCode: run.exitCode, ...(status === 'failure' ? { error: `exited with code ${run.exitCode}` } : {}) };
  }
  if (run.status === 'running')
    return { how: 'interrupted', ...interruptedOutcome(build.canceled ? 'canceled' : build.timedOut ? 'timeout' : 'stopped', build.timeoutMs) };
  if (build.canceled) return { how: 'not-reached', status: 'canceled', error: 'the build was canceled' };
  if (build.errored || build.timedOut) return { how: 'not-reached', status: 'killed', exitCode: KILLED_EXIT_CODE };
  return { how: 'not-reached', status: 'skipped' };
}

/** The init step's status when a phase before exec failed. */
export function initFailureStatus(canceled: boolean): Status {
  return canceled ? 'canceled' : 'failure';
}

/** What the build's final status depends on. */
export interface FinalFacts {
  readonly canceled: boolean;
  readonly cancelCause: unknown;
  readonly error: string | undefined;
  /** The status before the end (`pending` when the build never started). */
  readonly status: Status;
  /** A step failed without `continue`. */
  readonly failed: boolean;
}

/**
 * The build's final status and error: canceled (with the cancel's reason) wins, then error (a
 * phase failed or the build timed out), killed for a build that never started, then failure or
 * success from its steps.
 */
export function finalBuildOutcome(facts: FinalFacts): { status: Status; error: string | undefined } {
  if (facts.canceled) {
    const error = facts.error ?? (facts.cancelCause instanceof Error ? `the build was canceled: ${facts.cancelCause.message}` : 'the build was canceled');
    return { status: 'canceled', error };
  }
  if (facts.error !== undefined) return { status: 'error', error: facts.error };
  if (facts.status === 'pending') return { status: 'killed', error: undefined };
  return { status: facts.failed ? 'failure' : 'success', error: undefined };
}

/**
 * What has happened to the build so far — the facts the rules above read — and its status, times
 * and error for its report. The Executor records; the rules decide.
 */
export class BuildRecord {
  #status: Status = 'pending';
  #started: number | undefined;
  #finished: number | undefined;
  #error: string | undefined;
  #failed = false;
  #canceled = false;
  #cancelCause: unknown;
  #timedOut = false;

  /** `pending`, `running` from createBuild, final when the executor finishes the build (the end of exec or of destroy). */
  get status(): Status {
    return this.#status;
  }

  /** The error that stopped the build (masked), once one did. */
  get error(): string | undefined {
    return this.#error;
  }

  /** The build was cancelled (cancelBuild, or a cancel seen when work stopped). */
  get canceled(): boolean {
    return this.#canceled;
  }

  /** A step failed without `continue`. */
  get failed(): boolean {
    return this.#failed;
  }

  /** The build status rulesets see: `failure` once a step failed without `continue`, else `running`. */
  get ruleStatus(): string {
    return this.#failed ? 'failure' : 'running';
  }

  /** The build started running. */
  start(now = Date.now()): void {
    this.#status = 'running';
    this.#started = now;
  }

  /** A cancel asked for (cancelBuild), with its reason. */
  cancel(cause: unknown): void {
    this.#canceled = true;
    this.#cancelCause = cause;
  }

  /** Work stopped because its ctx ended, for `why`: a timeout or a cancel (whose reason `cause` gives) is recorded. */
  interrupted(why: Interruption, cause: () => unknown): void {
    if (why === 'timeout') this.#timedOut = true;
    if (why === 'canceled' && !this.#canceled) {
      this.#canceled = true;
      this.#cancelCause = cause();
    }
  }

  /** The build errored with `message`; the first error stays. */
  errored(message: string): void {
    this.#error ??= message;
  }

  /** A step failed without `continue`. */
  stepFailed(): void {
    this.#failed = true;
  }

  /** The facts destroyBuild's rule ({@link unfinishedOutcome}) reads. */
  facts(timeoutMs: number): BuildFacts {
    return { canceled: this.#canceled, timedOut: this.#timedOut, errored: this.#error !== undefined, timeoutMs };
  }

  /** The build is over: its final status and error by {@link finalBuildOutcome}. */
  finish(now = Date.now()): void {
    const { status, error } = finalBuildOutcome({
      canceled: this.#canceled,
      cancelCause: this.#cancelCause,
      error: this.#error,
      status: this.#status,
      failed: this.#failed,
    });
    this.#status = status;
    this.#error = error;
    this.#finished = now;
  }

  /** Status, times and error, as the build's report carries them. */
  reportFields(): { status: Status; started?: number; finished?: number; error?: string } {
    return {
      status: this.#status,
      ...(this.#started === undefined ? {} : { started: this.#started }),
      ...(this.#finished === undefined ? {} : { finished: this.#finished }),
      ...(this.#error === undefined ? {} : { error: this.#error }),
    };
  }
}
