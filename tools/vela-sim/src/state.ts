// The sim's records, in memory: repos, builds with their executables, step and service records
// with their logs, workers, secrets and SCM install tokens. One id sequence for all of them, as
// one database would hand out.

import { HttpError, type Params } from './http.ts';
import { now } from './auth.ts';
import type { VelaBuild, VelaLog, VelaRepo, VelaSecret, VelaService, VelaStep, VelaWorker } from './types.ts';

/** A stored log: the bytes of one step or service (server database/log). */
interface LogRow {
  id: number;
  build_id: number;
  repo_id: number;
  step_id?: number;
  service_id?: number;
  data: Buffer;
  created_at: number;
}

/** A stored worker: its running builds are kept as ids. */
export type StoredWorker = VelaWorker & { running_build_ids: number[] };

/** An SCM install token the sim minted (server `cache/models/install_token.go`, kept per build). */
export interface InstallTokenRecord {
  token: string;
  buildId: number;
  expiration: number;
  repositories: string[];
  permissions: Record<string, string>;
}

/** Which records a log belongs to: a step's or a service's. */
type RecordKind = 'step' | 'service';

/** Every record the sim keeps. */
export class SimState {
  /** Workers by hostname. */
  readonly workers = new Map<string, StoredWorker>();
  /** Builds by id. */
  readonly builds = new Map<number, VelaBuild>();
  /** Secrets by `engine/type/org/name/key`. */
  readonly secrets = new Map<string, VelaSecret>();
  /** SCM install tokens minted and not evicted, by token. */
  readonly installTokens = new Map<string, InstallTokenRecord>();
  /** Every install token minted, in order (evicted ones too). */
  readonly installTokenLog: InstallTokenRecord[] = [];
  /** Repos by `org/name`. */
  readonly repos = new Map<string, VelaRepo>();
  /** Executables by build id (deleted on the first read). */
  readonly executables = new Map<number, { id: number; build_id: number; data: string }>();
  /** Step records by build id, then number. */
  readonly steps = new Map<number, Map<number, VelaStep>>();
  /** Service records by build id, then number. */
  readonly services = new Map<number, Map<number, VelaService>>();
  /** Logs by `step:{id}` or `service:{id}`. */
  readonly #logs = new Map<string, LogRow>();
  #ids = 0;

  /** The next id of the one sequence. */
  nextId(): number {
    this.#ids += 1;
    return this.#ids;
  }

  /** The repo `org/name`, created with `fields` (and the defaults below) when new. */
  repo(org: string, name: string, fields: Partial<VelaRepo> = {}): VelaRepo {
    const key = `${org}/${name}`;
    let repo = this.repos.get(key);
    if (!repo) {
      repo = {
        id: this.nextId(),
        owner: { id: 1, name: 'octocat', active: true },
        org,
        name,
        full_name: key,
        link: `https://github.example/${key}`,
        clone: `https://github.example/${key}.git`,
        branch: 'main',
        timeout: 30,
        visibility: 'public',
        private: false,
        trusted: false,
        active: true,
        pipeline_type: 'yaml',
        counter: 0,
        ...fields,
      };
      this.repos.set(key, repo);
    }
    return repo;
  }

  /** The build `org/repo#number`, if any. */
  findBuild(org: string, repo: string, number: number): VelaBuild | undefined {
    for (const b of this.builds.values()) if (b.repo?.org === org && b.repo.name === repo && b.number === number) return b;
    return undefined;
  }

  /** The build a route's `:org/:repo/builds/:build` names, or a 404 (unknown repo or build) or 400 (not a number). */
  buildOf(params: Params): VelaBuild {
    const org = params.org!;
    const repo = params.repo!;
    if (!this.repos.has(`${org}/${repo}`)) throw new HttpError(404, `unable to read repo ${org}/${repo}: record not found`);
    const n = Number(params.build);
    if (!Number.isInteger(n)) throw new HttpError(400, `invalid build parameter provided: ${params.build}`);
    const b = this.findBuild(org, repo, n);
    if (!b) throw new HttpError(404, `unable to read build ${org}/${repo}/${n}: record not found`);
    return b;
  }

  /** Stores an empty log for the step or service record `recordId` of `build`. */
  addEmptyLog(build: VelaBuild, kind: RecordKind, recordId: number, createdAt: number): void {
    this.#logs.set(`${kind}:${recordId}`, {
      id: this.nextId(),
      build_id: build.id!,
      repo_id: build.repo!.id!,
      ...(kind === 'step' ? { step_id: recordId } : { service_id: recordId }),
      data: Buffer.alloc(0),
      created_at: createdAt,
    });
  }

  /** The stored log of a step or service record, if any. */
  log(kind: RecordKind, recordId: number | undefined): LogRow | undefined {
    return recordId === undefined ? undefined : this.#logs.get(`${kind}:${recordId}`);
  }

  /** A log as the API answers it: `data` in base64. */
  logJson(row: LogRow): VelaLog {
    const { data, ...rest } = row;
    return { ...rest, data: data.toString('base64') };
  }

  /**
   * Plans the step and service records of a build from its pipeline, each with an empty log, as
   * the server does at compile time: steps (also those of stages) and services, numbered by their
   * `number` or their position.
   */
  plan(build: VelaBuild, pipeline: Record<string, unknown>): void {
    const steps = new Map<number, VelaStep>();
    const services = new Map<number, VelaService>();
    const containers = (list: unknown): Array<Record<string, unknown>> =>
      Array.isArray(list) ? (list.filter((c) => typeof c === 'object' && c !== null) as Array<Record<string, unknown>>) : [];
    const planned: Array<{ c: Record<string, unknown>; stage?: string }> = [];
    for (const c of containers(pipeline.steps)) planned.push({ c });
    for (const s of containers(pipeline.stages)) {
      for (const c of containers(s.steps)) planned.push({ c, stage: typeof s.name === 'string' ? s.name : '' });
    }
    const t = now();
    // What a step record and a service record share: numbered by `number` or position.
    const record = (c: Record<string, unknown>, i: number, kind: 'step' | 'service') => {
      const number = typeof c.number === 'number' && c.number > 0 ? c.number : i + 1;
      return {
        id: this.nextId(),
        build_id: build.id!,
        repo_id: build.repo!.id!,
        number,
        name: typeof c.name === 'string' ? c.name : `${kind}-${number}`,
        image: typeof c.image === 'string' ? c.image : '',
        status: 'pending',
        created: t,
      };
    };
    planned.forEach(({ c, stage }, i) => {
      const step: VelaStep = { ...record(c, i, 'step'), stage: stage ?? '', report_as: typeof c.report_as === 'string' ? c.report_as : '' };
      steps.set(step.number!, step);
      this.addEmptyLog(build, 'step', step.id!, t);
    });
    containers(pipeline.services).forEach((c, i) => {
      const svc: VelaService = record(c, i, 'service');
      services.set(svc.number!, svc);
      this.addEmptyLog(build, 'service', svc.id!, t);
    });
    this.steps.set(build.id!, steps);
    this.services.set(build.id!, services);
  }
}
