/**
 * The reaper: what a crashed run of this worker left (runtime resources labelled with its id,
 * builds the server still lists as running here), and reporting a build as errored with a build
 * token ({@link Reaper.failBuild}, also used by the slot runner).
 */
import { type Context, errOf, withTimeout } from '@berth/context';
import { isVelaStatus } from '../vela/client.ts';
import type { Registrar } from './registrar.ts';
import type { DaemonCore } from './types.ts';
import { nowSec } from './util.ts';

/** Reaping at start, and failing builds. */
export class Reaper {
  readonly #core: DaemonCore;
  readonly #registrar: Registrar;

  constructor(core: DaemonCore, registrar: Registrar) {
    this.#core = core;
    this.#registrar = registrar;
  }

  /**
   * What a crashed run of this worker left: containers, networks, volumes and pods labelled with
   * this worker's id, and builds the server still believes run here, reported as errored.
   */
  async reap(ctx: Context): Promise<void> {
    const keep = new Set([...this.#core.slots.values()].map((s) => String(s.build().id)));
    try {
      const [rctx, cancel] = withTimeout(ctx, 120_000);
      try {
        const report = await this.#core.runtime!.reap(rctx, this.#core.workerId, keep);
        const n = report.containers.length + report.networks.length + report.volumes.length + report.pods.length;
        if (n > 0) this.#core.log.warn({ ...report }, `reaped ${n} resource(s) a previous run of this worker left`);
      } finally {
        cancel();
      }
    } catch (e) {
      if (ctx.signal.aborted) throw errOf(ctx);
      this.#core.log.error({ err: e }, 'reaping the runtime failed; a later start will try again');
    }
    const left = new Map(this.#core.state.load().map((r) => [r.id, r]));
    try {
      const me = await this.#registrar.authClient().getWorker(ctx, this.#core.workerId);
      for (const b of me?.running_builds ?? []) {
        if (typeof b.id !== 'number' || this.#isRunning(b.id)) continue;
        const org = b.repo?.org;
        const repo = b.repo?.name;
        if (!org || !repo || typeof b.number !== 'number') {
          this.#core.log.warn({ build: b.id }, 'the server lists a running build of this worker without its repo; cannot report it');
          continue;
        }
        const saved = left.get(b.id);
        await this.failBuild(
          ctx,
          { id: b.id, org, repo, number: b.number },
          'The worker running this build stopped unexpectedly (it was restarted); the build was lost.',
          {
            token: saved?.token,
          },
        );
      }
      this.#core.state.reset();
      await this.#registrar.putWorker(ctx);
    } catch (e) {
      if (ctx.signal.aborted) throw errOf(ctx);
      this.#core.log.error({ err: e }, 'could not read or update the builds the server believes run on this worker');
    }
  }

  #isRunning(buildId: number): boolean {
    for (const s of this.#core.slots.values()) if (s.build().id === buildId) return true;
    return false;
  }

  /**
   * Sets a build to `error` with `message`, with a build token: the one given (saved at claim), else
   * a fresh one (the server mints them for pending builds only). Never the server secret: the
   * build PUT needs a build token for this very build (server router/build.go `PUT` with
   * perm.MustBuildAccess, which lets only a WorkerBuild token or a platform admin through; the
   * secret maps to a ServerWorker claim). Never rejects.
   */
  async failBuild(
    ctx: Context,
    b: { id?: number; org: string; repo: string; number: number },
    message: string,
    how: { token?: string | undefined } = {},
  ): Promise<boolean> {
    const where = { build: b.id, repo: `${b.org}/${b.repo}`, number: b.number };
    const tokens: string[] = [];
    if (how.token) tokens.push(how.token);
    if (tokens.length === 0) {
      try {
        tokens.push(await this.#registrar.authClient().buildToken(ctx, b.org, b.repo, b.number, { retry: { attempts: 3 } }));
      } catch (e) {
        if (isVelaStatus(e, 409))
          this.#core.log.warn(
            { ...where, error: message },
            'no build token for a build that is no longer pending (none was saved): left as the server has it; cancel it on the server',
          );
        else if (isVelaStatus(e, 404)) this.#core.log.warn({ ...where }, 'the server has no such build');
        else this.#core.log.error({ ...where, err: e }, 'could not get a build token to report the build as errored');
        return false;
      }
    }
    for (const token of tokens) {
      try {
        await this.#core.client
          .withToken(token)
          .updateBuild(ctx, b.org, b.repo, { number: b.number, status: 'error', error: message, finished: nowSec() }, { retry: { attempts: 3 } });
        this.#core.log.warn({ ...where, error: message }, 'build reported as errored');
        return true;
      } catch (e) {
        this.#core.log.error({ ...where, err: e }, 'could not report the build as errored');
      }
    }
    return false;
  }
}
