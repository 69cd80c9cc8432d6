/**
 * The drain: after `shutdown()`, let running builds finish within the drain grace, then cancel
 * them (forced), send the final worker record, and close the queue, runtime and API.
 */
import { type CancelFunc, withTimeout } from '@berth/context';
import type { Registrar } from './registrar.ts';
import type { SlotRunner } from './slot-runner.ts';
import type { DaemonCore } from './types.ts';

/** What the drain closes besides the queue and the runtime. */
export interface DrainParts {
  registrar: Registrar;
  slots: SlotRunner;
  /** How long running builds may go on once draining starts. */
  graceMs: number;
  /** Ends the root context (everything still waiting on it). */
  cancelRoot: CancelFunc;
  /** Closes the worker API (if it listens). */
  closeApi: () => Promise<void>;
  /** Called once everything is closed. */
  onClosed: () => void;
}

/** Draining, forcing and closing. */
export class Drain {
  readonly #core: DaemonCore;
  readonly #p: DrainParts;
  #forced = false;

  constructor(core: DaemonCore, parts: DrainParts) {
    this.#core = core;
    this.#p = parts;
  }

  /** True once running builds are being cancelled. */
  get forced(): boolean {
    return this.#forced;
  }

  /** Cancels every running build now. */
  force(reason: string): void {
    this.#forced = true;
    this.#core.log.warn({ reason, running: this.#core.slots.size }, 'forced shutdown: canceling running builds now');
    for (const s of this.#core.slots.values()) s.executor?.cancelBuild(new Error(`the worker is shutting down (${reason})`));
  }

  /** Waits for the slots (forcing after the grace), sends the final worker record, closes. Never rejects. */
  async run(): Promise<void> {
    const { log, root, slots } = this.#core;
    try {
      const grace = this.#p.graceMs;
      const all = this.#p.slots.all();
      const [graceCtx, cancelGrace] = withTimeout(root, grace);
      try {
        await Promise.race([all, graceCtx.done()]);
      } finally {
        cancelGrace();
      }
      if (slots.size > 0 && !this.#forced) this.force(`the drain grace of ${Math.round(grace / 1000)} s is over`);
      await all;
      const [ctx, cancel] = withTimeout(root, 20_000);
      await this.#p.registrar
        .putWorker(ctx)
        .catch((e: unknown) => log.warn({ err: e }, 'final worker update failed'))
        .finally(cancel);
    } catch (e) {
      log.error({ err: e }, 'error while draining');
    } finally {
      await this.#close();
    }
  }

  async #close(): Promise<void> {
    const { log } = this.#core;
    this.#p.cancelRoot(new Error('the worker stopped'));
    this.#p.registrar.queue?.close();
    try {
      await this.#core.runtime?.close();
    } catch (e) {
      log.warn({ err: e }, 'closing the runtime failed');
    }
    try {
      await this.#p.closeApi();
    } catch (e) {
      log.warn({ err: e }, 'closing the API failed');
    }
    log.info('the worker stopped');
    this.#p.onClosed();
  }
}
