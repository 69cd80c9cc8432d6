/**
 * The fleet's builds: sleep builds enqueued through vela-sim, and what vela-sim recorded of each
 * (claims, status updates) to judge "exactly once".
 */
import { compilePipeline, marshalBuild } from '@berth/pipeline';
import type { VelaSim } from '@berth/vela-sim';

const IMAGE = process.env.BERTH_BUSYBOX_IMAGE ?? 'berth/busybox:1.35';
/** Vela's final build statuses (go-vela/server constants: success, failure, error, canceled, killed). */
const FINAL = new Set(['success', 'failure', 'error', 'canceled', 'killed']);

/** Enqueues `n` builds of one step that sleeps `seconds`, each in its own repo; returns their ids. */
export async function enqueueSleepBuilds(sim: VelaSim, route: string, n: number, seconds: number, tag: string): Promise<number[]> {
  const yaml = `version: "1"\nsteps:\n  - name: sleep\n    image: ${IMAGE}\n    pull: never\n    commands: ["sleep ${seconds}", "echo done"]\n`;
  const ids: number[] = [];
  for (let i = 0; i < n; i++) {
    const repo = `${tag}-${i}`;
    const r = compilePipeline(yaml, { file: '.vela.yml', identity: { org: 'fleet', repo, number: 1 } });
    if (!r.ok) throw new Error(`the fleet's pipeline does not compile: ${JSON.stringify(r.errors)}`);
    const { build } = await sim.enqueueBuild({ org: 'fleet', repo, number: 1, pipeline: marshalBuild(r.build), route });
    ids.push(build.id!);
  }
  return ids;
}

/** What vela-sim saw of one build. */
export interface BuildRecord {
  id: number;
  status: string | undefined;
  error: string | undefined;
  host: string | undefined;
  /** Successful reads of its executable: one per claim (the server deletes it on read). */
  claims: number;
  /** Status updates that set a final status. */
  finals: number;
}

/** The record of each build in `ids`. */
export function buildRecords(sim: VelaSim, ids: readonly number[]): BuildRecord[] {
  const numberOf = new Map<string, number>();
  for (const id of ids) {
    const b = sim.builds.get(id)!;
    numberOf.set(`/api/v1/repos/${b.repo?.org}/${b.repo?.name}/builds/${b.number}`, id);
  }
  const claims = new Map<number, number>();
  const finals = new Map<number, number>();
  for (const c of sim.calls) {
    if (c.status !== 200) continue;
    if (c.method === 'GET' && c.path.endsWith('/executable')) {
      const id = numberOf.get(c.path.slice(0, -'/executable'.length));
      if (id !== undefined) claims.set(id, (claims.get(id) ?? 0) + 1);
    } else if (c.method === 'PUT') {
      const id = numberOf.get(c.path);
      const status = /"status":"(\w+)"/.exec(c.summary)?.[1];
      if (id !== undefined && status !== undefined && FINAL.has(status)) finals.set(id, (finals.get(id) ?? 0) + 1);
    }
  }
  return ids.map((id) => {
    const b = sim.builds.get(id)!;
    return { id, status: b.status, error: b.error, host: b.host, claims: claims.get(id) ?? 0, finals: finals.get(id) ?? 0 };
  });
}

/** Whether a status is final. */
export function isFinal(status: string | undefined): boolean {
  return status !== undefined && FINAL.has(status);
}

/** When each build of the sim first showed a final status (polled every 200 ms), until `stop()`. */
export function watchFinals(sim: VelaSim): { finalAt: Map<number, number>; stop(): void } {
  const finalAt = new Map<number, number>();
  const timer = setInterval(() => {
    const now = Date.now();
    for (const [id, b] of sim.builds) if (!finalAt.has(id) && isFinal(b.status)) finalAt.set(id, now);
  }, 200);
  return { finalAt, stop: () => clearInterval(timer) };
}

/** The ids of builds running on worker `host` now (their status in vela-sim). */
export function runningOn(sim: VelaSim, ids: readonly number[], host: string): number[] {
  return ids.filter((id) => {
    const b = sim.builds.get(id);
    return b?.status === 'running' && b.host === host;
  });
}
