/**
 * The Reporter: where the executor sends a build's status and logs. A console reporter prints
 * them for `berth exec`; a Vela reporter sends them to a Vela server.
 */
import type { Context } from '@berth/context';
import type { RuntimeEvent } from '@berth/runtime';
import type { Status } from './status.ts';

/** What a log or a status belongs to: the init step, a step (top-level or in a stage), or a service. */
export type TargetKind = 'init' | 'step' | 'service';

/** Names one container of the build (or the init step, which is no container). */
export interface Target {
  kind: TargetKind;
  /** The container's name as the pipeline says (`init`, `test`, `redis`). */
  name: string;
  /** Vela's 1-based number, the key a Vela server stores steps and services under (0 for a synthesized init step). */
  number: number;
  /** The container's id (`step_org_repo_1_test`). */
  id: string;
  /** The stage a stage step belongs to. */
  stage?: string;
  /** The image, `#init` for the init step. */
  image: string;
}

/** A step's or service's state, as reported on every change. */
export interface StepReport extends Target {
  status: Status;
  /** The container's exit code; 137 when killed, cancelled or timed out; 0 while running. */
  exitCode: number;
  /** When it started (ms since the epoch), once it did. */
  started?: number;
  /** When it finished (ms since the epoch), once it did. */
  finished?: number;
  /** What went wrong, in words for the user (never a secret value). */
  error?: string;
  /** A detached step or a service: it runs in the background until it ends or the build ends. */
  detached: boolean;
  /** A failure of this step does not fail the build (`ruleset.continue`). */
  continueOnFailure: boolean;
}

/** The build's state, as reported on every change. */
export interface BuildReport {
  /** The compiled pipeline's id (`org_repo_42`). */
  id: string;
  status: Status;
  started?: number;
  finished?: number;
  /** Why the build errored or was cancelled, in words for the user. */
  error?: string;
  /** The runtime's name (`docker`, `kubernetes`). */
  runtime: string;
  /** Where the build runs: the worker's host name. */
  host: string;
  /** Vela's distribution, `linux`. */
  distribution: string;
}

/**
 * Receives a build's status and logs.
 *
 * Guarantees the executor gives: statuses of one target arrive in order; a target's log arrives as
 * `appendLog` calls in order, never two at once for the same target, each a batch of at most
 * `batchBytes` (64 KiB by default) or what gathered in `flushIntervalMs` (1 s), already masked and
 * capped; then one `closeLog`. Bytes are never sent twice: a reporter whose server replaces the
 * whole log on each upload (Vela) keeps what it received and throttles its uploads (the worker's
 * Vela reporter does). The executor awaits every call: a slow `appendLog` slows the
 * reading of that container's log (backpressure) and nothing piles up in memory.
 *
 * Gotchas: `appendLog` gets the log-streaming ctx, which ends when the build was cancelled and its
 * grace is over (the rest of the log is then dropped); `closeLog` and the status calls get a ctx
 * that is not cancelled with the build: bound your own requests. A method that rejects is logged
 * and otherwise ignored: it never fails the build.
 */
export interface Reporter {
  /** The build's status changed (running, then a final status). */
  buildStatus(ctx: Context, build: BuildReport): Promise<void>;
  /** A step's, a service's or the init step's status changed (see {@link StepReport.kind}). */
  stepStatus(ctx: Context, step: StepReport): Promise<void>;
  /** The next bytes of `target`'s log. `chunk` is the reporter's to keep. */
  appendLog(ctx: Context, target: Target, chunk: Uint8Array): Promise<void>;
  /** `target`'s log is complete: no more `appendLog` for it. */
  closeLog(ctx: Context, target: Target): Promise<void>;
  /**
   * Pull progress and orchestrator notices for a container of the build (the runtime's `onEvent`,
   * routed by container id). Called synchronously, often: it must not throw nor block.
   */
  runtimeEvent?(ctx: Context, target: Target, event: RuntimeEvent): void;
}

/** A reporter that drops everything: for tests and for builds nobody watches. */
export const nullReporter: Reporter = {
  buildStatus: () => Promise.resolve(),
  stepStatus: () => Promise.resolve(),
  appendLog: () => Promise.resolve(),
  closeLog: () => Promise.resolve(),
};

/** Sends every call to each of `reporters` in turn (a console and a server, say). */
export function combineReporters(...reporters: Reporter[]): Reporter {
  return {
    async buildStatus(ctx, build) {
      for (const r of reporters) await r.buildStatus(ctx, build);
    },
    async stepStatus(ctx, step) {
      for (const r of reporters) await r.stepStatus(ctx, step);
    },
    async appendLog(ctx, target, chunk) {
      // Each reporter may keep its chunk: give the others their own copy.
      for (let i = 0; i < reporters.length; i++) await reporters[i]?.appendLog(ctx, target, i === 0 ? chunk : chunk.slice());
    },
    async closeLog(ctx, target) {
      for (const r of reporters) await r.closeLog(ctx, target);
    },
    runtimeEvent(ctx, target, event) {
      for (const r of reporters) r.runtimeEvent?.(ctx, target, event);
    },
  };
}
