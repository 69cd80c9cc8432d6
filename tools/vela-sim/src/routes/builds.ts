// Builds and their states (go-vela/server router/build.go, api/build/*.go): the build token, the
// executable (deleted on read), reading and updating a build, and cancelling it.

import { now, requireBuildAccess, requireType } from '../auth.ts';
import { BUILD as B, type SimContext, buildTokenTtl } from '../context.ts';
import { HttpError, type Reply, type Router, asObject } from '../http.ts';
import type { VelaBuild } from '../types.ts';

/** Adds the build routes. */
export function buildRoutes(router: Router, ctx: SimContext): void {
  const { state } = ctx;

  // api/build/token.go GetBuildToken: only for a pending build.
  router.route('GET', `${B}/token`, ({ caller, params }) => {
    requireType(caller, ['WorkerAuth', 'ServerWorker']);
    const b = state.buildOf(params);
    if (b.status !== 'pending') throw new HttpError(409, `unable to mint build token: build ${b.repo?.full_name}/${b.number} is not in pending state`);
    return {
      status: 200,
      body: { token: ctx.tokens.mint('WorkerBuild', caller.claims.sub, buildTokenTtl(ctx, b), { build_id: b.id!, repo: b.repo!.full_name! }) },
    };
  });

  // api/build/executable.go GetBuildExecutable: the executable is popped (deleted on read).
  router.route('GET', `${B}/executable`, ({ caller, params }) => {
    const b = state.buildOf(params);
    requireBuildAccess(caller, b);
    const e = state.executables.get(b.id!);
    if (!e) throw new HttpError(500, `unable to pop build executable: record not found`);
    state.executables.delete(b.id!);
    return { status: 200, body: e };
  });

  // router/build.go: b.DELETE("/cancel", perm.MustWrite(), build.CancelBuild). The sim has no
  // users: the shared secret stands for an operator with write access.
  router.route('DELETE', `${B}/cancel`, ({ caller, params }) => {
    if (!caller.viaSecret) throw new HttpError(401, `invalid token type: ${caller.claims.token_type} (want a user with write access)`);
    return cancel(ctx, state.buildOf(params), 'vela-admin');
  });

  // api/build/get.go GetBuild.
  router.route('GET', B, ({ caller, params }) => {
    const b = state.buildOf(params);
    requireBuildAccess(caller, b);
    return { status: 200, body: b };
  });

  // api/build/update.go UpdateBuild: applies only the fields the server applies.
  router.route('PUT', B, ({ caller, params, body }) => {
    const b = state.buildOf(params);
    requireBuildAccess(caller, b);
    const input = asObject(body) as VelaBuild;
    for (const k of ['status', 'error', 'title', 'message', 'host', 'runtime', 'distribution'] as const) {
      const v = input[k];
      if (typeof v === 'string' && v !== '') b[k] = v;
    }
    for (const k of ['enqueued', 'started', 'finished'] as const) {
      const v = input[k];
      if (typeof v === 'number' && v > 0) b[k] = v;
    }
    // Server api/build/update.go: a build in a final state loses its install tokens.
    if (!['running', 'pending', 'pending approval'].includes(b.status ?? '')) {
      for (const [t, rec] of state.installTokens) if (rec.buildId === b.id) state.installTokens.delete(t);
    }
    return { status: 200, body: b };
  });
}

/**
 * The server's cancel, api/build/cancel.go CancelBuild: a running build is cancelled on the
 * worker that runs it (CancelRunning: getWorkerExecutors GETs the worker's /api/v1/executors,
 * then cancelBuildForExecutor DELETEs /api/v1/executors/{id}/build/cancel with a server token,
 * both through http.DefaultClient with `client.Timeout = 30 * time.Second`, and waits for the
 * answer); the build the worker answers is stored with `running build was canceled by <user>`
 * and status `canceled` (database UpdateBuild) and returned. A running build no executor has is
 * marked canceled as stale; a pending one is marked canceled; any other status is a 400.
 */
async function cancel(ctx: SimContext, build: VelaBuild, user: string): Promise<Reply> {
  const entry = `${build.repo?.full_name ?? '?'}#${build.number}`;
  if (build.status === 'running') {
    const worker = build.host ? ctx.state.workers.get(build.host) : undefined;
    if (!worker?.address) throw new HttpError(500, `unable to cancel running build ${entry}: no worker for host ${build.host ?? ''}`);
    const auth = { authorization: `Bearer ${ctx.tokens.serverToWorker()}` };
    let executors: Array<{ id?: number; build?: { id?: number } }>;
    try {
      const res = await fetch(`${worker.address}/api/v1/executors`, { headers: auth, signal: AbortSignal.timeout(30_000) });
      executors = (await res.json()) as typeof executors;
    } catch (e) {
      throw new HttpError(500, `unable to cancel running build ${entry}: ${e instanceof Error ? e.message : String(e)}`);
    }
    const executor = Array.isArray(executors) ? executors.find((x) => x.build?.id === build.id) : undefined;
    if (executor) {
      let answered: VelaBuild;
      try {
        const res = await fetch(`${worker.address}/api/v1/executors/${executor.id}/build/cancel`, {
          method: 'DELETE',
          headers: auth,
          signal: AbortSignal.timeout(30_000),
        });
        answered = asObject(await res.json());
      } catch (e) {
        throw new HttpError(500, `unable to cancel running build ${entry}: ${e instanceof Error ? e.message : String(e)}`);
      }
      // build.SetError(...); build.SetStatus(StatusCanceled); UpdateBuild(ctx, build): the row
      // becomes the worker's answer with those two fields (the id is the stored build's).
      Object.assign(build, answered, { id: build.id, error: `running build was canceled by ${user}`, status: 'canceled' });
      return { status: 200, body: build };
    }
    build.error = `stale build was canceled by ${user}`;
    build.status = 'canceled';
    build.finished = now();
    return { status: 200, body: build };
  }
  if (build.status === 'pending' || build.status === 'pending approval') {
    build.error = `${build.status} build was canceled by ${user}`;
    build.status = 'canceled';
    build.finished = now();
    return { status: 200, body: build };
  }
  throw new HttpError(400, `found build ${entry} but its status was ${build.status}`);
}
