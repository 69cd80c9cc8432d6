/**
 * Types the daemon's parts share, and the narrow view of the daemon its HTTP API gets
 * ({@link WorkerApiHost}), so that `api.ts` never imports `daemon.ts`.
 */
import type { Context } from '@berth/context';
import type { BuildResult, Executor } from '@berth/executor';
import type { Runtime } from '@berth/runtime';
import type { Logger } from 'pino';
import type { WorkerCredentials } from '../vela/auth.ts';
import type { VelaClient } from '../vela/client.ts';
import type { StartConfig } from '../vela/config.ts';
import type { VelaBuild } from '../vela/models.ts';
import type { DaemonMetrics } from './metrics.ts';
import type { RunningBuildsFile } from './state.ts';

/** One build slot's current build, as the executors API shows it. */
export interface SlotEntry {
  slot: number;
  /** The build as last stored by the server. */
  build: () => VelaBuild;
  /** The compiled pipeline without secret values or tokens. */
  pipeline: Record<string, unknown>;
  repo: VelaBuild['repo'];
  executor: Executor | undefined;
  /**
   * A cancel that arrived before the executor existed (while the slot was starting: the worker
   * PUT and its retries); the executor is cancelled with it as soon as it appears.
   */
  pendingCancel: Error | undefined;
  /** Settles when the build is over (reported, cleaned). */
  done: Promise<BuildResult | undefined>;
}

/** The `/ready` checks. */
export interface Readiness {
  ready: boolean;
  checks: Record<'registered' | 'queue' | 'runtime', { ok: boolean; error?: string }>;
}

/** What the worker API needs of the daemon. */
export interface WorkerApiHost {
  readonly log: Logger;
  readonly version: string;
  readonly metrics: DaemonMetrics;
  readonly credentials: WorkerCredentials;
  readonly draining: boolean;
  /** Slot → its current build. */
  readonly slots: ReadonlyMap<number, SlotEntry>;
  /** The runtime driver's name (`docker`, `kubernetes`) and the build limit (executor ids). */
  readonly config: { readonly runtime: { readonly driver: string }; readonly build: { readonly limit: number } };
  readiness(probeRuntime: (ctx: Context, runtime: Runtime) => Promise<string | undefined>): Promise<Readiness>;
  validateServerToken(token: string): Promise<boolean>;
  cancel(slot: number): { build: VelaBuild; canceled: boolean } | undefined;
}

/**
 * What the daemon's parts (registrar, reaper, slot runner, drain) share: built once by the
 * `Daemon` and handed to each part, so that no part imports `daemon.ts`.
 */
export interface DaemonCore {
  readonly config: StartConfig;
  readonly log: Logger;
  readonly version: string;
  readonly metrics: DaemonMetrics;
  readonly credentials: WorkerCredentials;
  /** The Vela client without a token (parts add the token they need). */
  readonly client: VelaClient;
  /** The worker id (labels, reaping): the hostname of the worker address. */
  readonly workerId: string;
  /** Ends when the worker stops. */
  readonly root: Context;
  /** Ends when draining starts: stops pops and the wait for registration. */
  readonly claimCtx: Context;
  /** Slot → its current build. Pruned when the build ends. */
  readonly slots: Map<number, SlotEntry>;
  /** The running-builds file (build tokens of running builds). */
  readonly state: RunningBuildsFile;
  /** Wait after a failed pop, claim or registration before the next one. */
  readonly errorBackoffMs: number;
  /** The runtime, once created. */
  readonly runtime: Runtime | undefined;
  /** True once `shutdown()` was called. */
  readonly draining: boolean;
  /** True once running builds are being cancelled (second shutdown, or the drain grace is over). */
  readonly forced: boolean;
}
