// Worker registration and check-in (go-vela/server router/worker.go, api/worker/*.go), the
// queue info a registering worker reads (api/queue/queue.go Info) and the server-token check
// (router/router.go /validate-token → api/auth/validate.go ValidateServerToken).

import { now, requireType } from '../auth.ts';
import type { SimContext } from '../context.ts';
import { type Caller, HttpError, type Router, asObject } from '../http.ts';
import type { TokenType } from '../jwt.ts';
import type { StoredWorker } from '../state.ts';
import type { VelaWorker } from '../types.ts';

/** A worker as the API answers it: running builds expanded from their ids. */
function workerJson(ctx: SimContext, w: StoredWorker): VelaWorker {
  const { running_build_ids, ...rest } = w;
  return { ...rest, running_builds: running_build_ids.map((id) => ctx.state.builds.get(id) ?? { id }) };
}

/** The token a registering or refreshing worker gets: the secret itself for the secret, else a fresh auth token. */
function workerToken(ctx: SimContext, caller: Caller): string {
  if (caller.claims.token_type === 'ServerWorker') return ctx.secret;
  return ctx.tokens.mint('WorkerAuth', caller.claims.sub, ctx.options.workerAuthTokenTtlSec ?? 20 * 60);
}

/** Adds the validate-token, queue-info and worker routes. */
export function workerRoutes(router: Router, ctx: SimContext): void {
  const any: TokenType[] = ['WorkerAuth', 'WorkerRegister', 'ServerWorker'];
  const { state } = ctx;

  // api/auth/validate.go ValidateServerToken.
  router.route('GET', '/validate-token', ({ caller }) => {
    if (caller.claims.sub !== 'vela-server') throw new HttpError(401, 'token is not a valid server token');
    return { status: 200, body: 'valid server token' };
  });

  // api/queue/queue.go Info.
  router.route('GET', '/api/v1/queue/info', ({ caller }) => {
    requireType(caller, ['WorkerRegister', 'ServerWorker']);
    return { status: 200, body: { queue_public_key: ctx.queueKeys.publicKeyBase64, queue_address: ctx.queueAddr } };
  });

  // api/worker/get.go GetWorker.
  router.route('GET', '/api/v1/workers/:host', ({ caller, params }) => {
    requireType(caller, any);
    const w = state.workers.get(params.host!);
    if (!w) throw new HttpError(404, `unable to get worker ${params.host}: record not found`);
    return { status: 200, body: workerJson(ctx, w) };
  });

  // api/worker/create.go CreateWorker.
  router.route('POST', '/api/v1/workers', ({ caller, body }) => {
    requireType(caller, ['WorkerRegister', 'ServerWorker']);
    const input = asObject(body) as VelaWorker;
    if (typeof input.hostname !== 'string' || input.hostname === '') throw new HttpError(400, 'unable to create worker: hostname is required');
    if (caller.claims.token_type !== 'ServerWorker' && caller.claims.sub !== input.hostname) {
      throw new HttpError(400, `unable to add worker; claims subject ${caller.claims.sub} does not match worker hostname ${input.hostname}`);
    }
    if (state.workers.has(input.hostname)) throw new HttpError(500, `unable to create worker: worker ${input.hostname} already exists`);
    const ids = (input.running_builds ?? []).map((b) => b.id).filter((id): id is number => typeof id === 'number');
    state.workers.set(input.hostname, {
      ...input,
      id: state.nextId(),
      running_builds: undefined,
      running_build_ids: ids,
      last_checked_in: now(),
    });
    return { status: 201, body: { token: workerToken(ctx, caller) } };
  });

  // api/worker/refresh.go Refresh.
  router.route('POST', '/api/v1/workers/:host/refresh', ({ caller, params }) => {
    requireType(caller, any);
    const w = state.workers.get(params.host!);
    if (!w) throw new HttpError(404, `unable to get worker ${params.host}: record not found`);
    if (caller.claims.token_type !== 'ServerWorker' && caller.claims.sub !== w.hostname) {
      throw new HttpError(400, `unable to refresh worker auth: claims subject ${caller.claims.sub} does not match worker hostname ${w.hostname}`);
    }
    w.last_checked_in = now();
    return { status: 200, body: { token: workerToken(ctx, caller) } };
  });

  // api/worker/update.go UpdateWorker: applies only the fields the server applies.
  router.route('PUT', '/api/v1/workers/:host', ({ caller, params, body }) => {
    requireType(caller, any);
    const w = state.workers.get(params.host!);
    if (!w) throw new HttpError(404, `unable to get worker ${params.host}: record not found`);
    const input = asObject(body) as VelaWorker;
    if (typeof input.address === 'string' && input.address !== '') w.address = input.address;
    if (Array.isArray(input.routes) && input.routes.length > 0) w.routes = input.routes;
    if (typeof input.active === 'boolean') w.active = input.active;
    if (Array.isArray(input.running_builds)) {
      w.running_build_ids = input.running_builds.map((b) => b.id).filter((id): id is number => typeof id === 'number');
    }
    if (typeof input.status === 'string' && input.status !== '') w.status = input.status;
    for (const k of ['last_status_update_at', 'last_build_started_at', 'last_build_finished_at', 'last_checked_in'] as const) {
      const v = input[k];
      if (typeof v === 'number' && v > 0) w[k] = v;
    }
    return { status: 200, body: workerJson(ctx, w) };
  });
}
