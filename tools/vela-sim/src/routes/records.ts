// Step and service records of a build and their logs (go-vela/server router/step.go,
// router/service.go, router/log.go; api/step/*.go, api/service/*.go, api/log/*.go). Logs are
// replaced whole by each PUT.

import { now, requireBuildAccess } from '../auth.ts';
import { BUILD as B, type SimContext } from '../context.ts';
import { HttpError, type Params, type Router, asObject } from '../http.ts';
import type { VelaBuild, VelaLog, VelaStep } from '../types.ts';

/** Adds the routes of steps and services (the same routes for both) and of their logs. */
export function recordRoutes(router: Router, ctx: SimContext): void {
  const { state } = ctx;
  for (const kind of ['steps', 'services'] as const) {
    const table = kind === 'steps' ? state.steps : state.services;
    const label = kind === 'steps' ? 'step' : 'service';
    const find = (params: Params): { build: VelaBuild; rec: VelaStep } => {
      const build = state.buildOf(params);
      const n = Number(params.n);
      const rec = table.get(build.id!)?.get(n);
      if (!rec) throw new HttpError(404, `unable to read ${label} ${build.repo?.full_name}/${build.number}/${params.n}: record not found`);
      return { build, rec };
    };

    // api/step/get.go GetStep, api/service/get.go GetService.
    router.route('GET', `${B}/${kind}/:n`, ({ caller, params }) => {
      const { build, rec } = find(params);
      requireBuildAccess(caller, build);
      return { status: 200, body: rec };
    });

    // api/step/create.go CreateStep, api/service/create.go CreateService: the record with an empty log.
    router.route('POST', `${B}/${kind}`, ({ caller, params, body }) => {
      const build = state.buildOf(params);
      requireBuildAccess(caller, build);
      const input = asObject(body) as VelaStep;
      if (typeof input.number !== 'number' || input.number <= 0) throw new HttpError(400, `unable to create ${label}: number is required`);
      const rows = table.get(build.id!) ?? new Map<number, VelaStep>();
      table.set(build.id!, rows);
      const rec: VelaStep = { ...input, id: state.nextId(), build_id: build.id!, repo_id: build.repo!.id!, created: now() };
      rows.set(input.number, rec);
      state.addEmptyLog(build, label, rec.id!, now());
      return { status: 201, body: rec };
    });

    // api/step/update.go UpdateStep, api/service/update.go UpdateService: applies only the
    // fields the server applies (a step's exit code only when non-zero).
    router.route('PUT', `${B}/${kind}/:n`, ({ caller, params, body }) => {
      const { build, rec } = find(params);
      requireBuildAccess(caller, build);
      const input = asObject(body) as VelaStep;
      const strings = label === 'step' ? (['status', 'error', 'host', 'runtime', 'distribution'] as const) : (['status', 'error'] as const);
      for (const k of strings) {
        const v = input[k];
        if (typeof v === 'string' && v !== '') rec[k] = v;
      }
      if (typeof input.exit_code === 'number' && (label === 'service' || input.exit_code > 0)) rec.exit_code = input.exit_code;
      for (const k of ['started', 'finished'] as const) {
        const v = input[k];
        if (typeof v === 'number' && v > 0) rec[k] = v;
      }
      return { status: 200, body: rec };
    });

    // api/log/get_step.go GetStepLog, api/log/get_service.go GetServiceLog.
    router.route('GET', `${B}/${kind}/:n/logs`, ({ caller, params }) => {
      const { build, rec } = find(params);
      requireBuildAccess(caller, build);
      const row = state.log(label, rec.id);
      if (!row) throw new HttpError(404, `unable to get logs for ${label} ${params.n}: record not found`);
      return { status: 200, body: state.logJson(row) };
    });

    // api/log/update_step.go UpdateStepLog, api/log/update_service.go UpdateServiceLog: the whole
    // log, replaced when `data` is non-empty.
    router.route('PUT', `${B}/${kind}/:n/logs`, ({ caller, params, body }) => {
      const { build, rec } = find(params);
      requireBuildAccess(caller, build);
      const row = state.log(label, rec.id);
      if (!row) throw new HttpError(500, `unable to get logs for ${label} ${params.n}: record not found`);
      const input = asObject(body) as VelaLog;
      if (input.data !== undefined && typeof input.data !== 'string')
        throw new HttpError(400, `unable to decode JSON for ${label} ${params.n}: data is not a string`);
      const data = typeof input.data === 'string' ? Buffer.from(input.data, 'base64') : Buffer.alloc(0);
      if (data.length > 0) row.data = data;
      return { status: 200, body: null };
    });
  }
}
