/**
 * The registrar: registration (token → queue info → first check-in), the check-in loop, and the
 * worker record PUT to the server (status, running builds, last build times). It owns the queue
 * connection, made from the server's queue info at registration.
 */
import { type Context, errOf, sleep } from '@berth/context';
import { checkIn, nextCheckInDelayMs } from '../vela/auth.ts';
import type { VelaClient } from '../vela/client.ts';
import type { VelaBuild, VelaWorker, VelaWorkerStatus } from '../vela/models.ts';
import { VelaQueue } from '../vela/queue.ts';
import type { DaemonCore } from './types.ts';
import { errText, nowSec } from './util.ts';

/** Registration, check-ins and the worker record. */
export class Registrar {
  readonly #core: DaemonCore;
  #queue: VelaQueue | undefined;
  #registered = false;
  /** The last check-in's queue PING answered (go-vela/worker `QueueCheckedIn`). */
  #queueOk = false;
  #routes: string[];
  #checkInError: string | undefined;
  #lastBuildStarted = 0;
  #lastBuildFinished = 0;

  constructor(core: DaemonCore) {
    this.#core = core;
    this.#routes = core.config.queue.routes;
  }

  /** The queue, once registered. */
  get queue(): VelaQueue | undefined {
    return this.#queue;
  }

  /** True once a check-in succeeded, and until one fails. */
  get registered(): boolean {
    return this.#registered;
  }

  /** The last check-in's queue PING answered. */
  get queueOk(): boolean {
    return this.#queueOk;
  }

  /** Why the last check-in failed (undefined after a good one). */
  get checkInError(): string | undefined {
    return this.#checkInError;
  }

  /** The routes to pop: the server's answer when it gave some, else the configured ones. */
  get routes(): string[] {
    return this.#routes;
  }

  /** Takes the routes of a worker record the server returned (when it has some). */
  updateRoutes(routes: string[] | undefined): void {
    if (routes && routes.length > 0) this.#routes = routes;
  }

  /** Records a build start or end for the worker record's `last_build_*_at`. */
  buildStarted(): void {
    this.#lastBuildStarted = nowSec();
  }

  buildFinished(): void {
    this.#lastBuildFinished = nowSec();
  }

  /** Registration token → queue info → first check-in, each retried until it works or the ctx ends. */
  async register(ctx: Context): Promise<void> {
    const { credentials, config, log } = this.#core;
    for (;;) {
      if (credentials.needsRegistration()) {
        log.warn('no server secret and no valid token: waiting for a registration token on POST /register');
      }
      const token = await credentials.registrationToken(ctx);
      try {
        const info = await this.#core.client.withToken(token).queueInfo(ctx);
        const url = config.queue.addr ?? info.queue_address;
        const publicKey = info.queue_public_key ?? config.queue.publicKey;
        if (!url || !publicKey) throw new Error(`the server's queue info has no ${!url ? 'queue address (set VELA_QUEUE_ADDR)' : 'public key'}`);
        this.#queue?.close();
        this.#queue = new VelaQueue({
          url,
          sentinel: config.queue.cluster,
          publicKey,
          routes: this.#routes.length > 0 ? this.#routes : ['vela'],
          popTimeoutSec: config.queue.popTimeoutMs / 1000,
          logger: { warn: (obj, msg) => log.warn(obj, msg) },
        });
        if (await this.#checkInOnce(ctx)) return;
      } catch (e) {
        if (ctx.signal.aborted) throw errOf(ctx);
        log.error({ err: e }, 'registration failed; retrying');
      }
      await sleep(ctx, this.#core.errorBackoffMs);
    }
  }

  async checkInLoop(ctx: Context): Promise<void> {
    const { credentials, config, log } = this.#core;
    while (!ctx.signal.aborted) {
      // Until a check-in and its queue PING both worked, retry every 5 s (operate.go's inner loop).
      const delay =
        this.#registered && this.#queueOk ? nextCheckInDelayMs(credentials.token ?? '', config.worker.checkInMs) : Math.min(5_000, config.worker.checkInMs);
      try {
        await sleep(ctx, delay);
        await this.#checkInOnce(ctx);
      } catch (e) {
        if (ctx.signal.aborted) return;
        log.error({ err: e }, 'check-in failed');
      }
    }
  }

  /** One check-in; re-registers (blocking until `/register`) when the token expired without a secret. */
  async #checkInOnce(ctx: Context): Promise<boolean> {
    const { credentials, log } = this.#core;
    if (credentials.needsRegistration()) {
      this.#registered = false;
      log.warn('the worker token expired and there is no server secret: waiting for a registration token on POST /register');
    }
    const token = await credentials.registrationToken(ctx);
    try {
      const result = await checkIn(ctx, this.#core.client.withToken(token), this.#record());
      credentials.setToken(result.token);
      this.updateRoutes(result.worker?.routes);
      const queueOk = (await this.#queue?.ping()) ?? false;
      this.#queueOk = queueOk;
      if (!queueOk) {
        log.error('the queue (Redis) does not answer PING');
        await this.putWorker(ctx, { status: 'error' }).catch(() => undefined);
      }
      if (!this.#registered) log.info({ created: result.registered, routes: this.#routes }, 'checked in with the server');
      this.#registered = true;
      this.#checkInError = undefined;
      return true;
    } catch (e) {
      if (ctx.signal.aborted) throw errOf(ctx);
      this.#registered = false;
      this.#checkInError = errText(e);
      log.error({ err: e }, 'check-in failed');
      return false;
    }
  }

  #status(): VelaWorkerStatus {
    const n = this.#runningBuilds().length;
    return n === 0 ? 'idle' : n < this.#core.config.build.limit ? 'available' : 'busy';
  }

  #runningBuilds(): VelaBuild[] {
    return [...this.#core.slots.values()].map((s) => ({ id: s.build().id }));
  }

  /**
   * The worker record of check-ins. Without `running_builds`, as Vela's check-in: the server keeps
   * its list, which the reap at start reads (build slots PUT the list themselves).
   */
  #record(): VelaWorker & { hostname: string } {
    const { config } = this.#core;
    return {
      hostname: this.#core.workerId,
      address: config.worker.addr,
      ...(config.queue.routes.length > 0 ? { routes: config.queue.routes } : {}),
      active: true,
      status: this.#status(),
      build_limit: config.build.limit,
    };
  }

  /** PUT the worker record with the running builds (always present, `[]` when none). */
  async putWorker(ctx: Context, extra: Partial<VelaWorker> = {}): Promise<void> {
    const token = this.#core.credentials.token;
    if (token === undefined) return;
    await this.#core.client.withToken(token).updateWorker(ctx, this.#core.workerId, {
      ...this.#record(),
      running_builds: this.#runningBuilds(),
      last_status_update_at: nowSec(),
      ...(this.#lastBuildStarted ? { last_build_started_at: this.#lastBuildStarted } : {}),
      ...(this.#lastBuildFinished ? { last_build_finished_at: this.#lastBuildFinished } : {}),
      ...extra,
    });
  }

  /** The Vela client with the worker's current token. */
  authClient(): VelaClient {
    return this.#core.client.withToken(this.#core.credentials.token ?? '');
  }
}
