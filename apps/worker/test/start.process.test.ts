// The real `node bin/berth.js start` process: drain on SIGTERM, a forcing second signal, and a
// SIGKILL mid-build followed by a restart that reaps what was left.
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { VelaSim } from '@berth/vela-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IMAGE, executable, labelled, uniqueRoute, waitFor, workerEnv } from './daemon-harness.ts';
import { tempDir } from './temp-dir.ts';

const BERTH = path.join(import.meta.dirname, '../bin/berth.js');

let sim: VelaSim;
beforeAll(async () => {
  sim = await VelaSim.start();
});
afterAll(async () => {
  await sim?.close();
});

interface Proc {
  child: ChildProcess;
  lines: Array<Record<string, unknown> & { msg?: string }>;
  url: Promise<string>;
  exit: Promise<number | null>;
}

function startProcess(env: Record<string, string>): Proc {
  const child = spawn(process.execPath, [BERTH, 'start'], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Proc['lines'] = [];
  let resolveUrl!: (u: string) => void;
  const url = new Promise<string>((r) => (resolveUrl = r));
  let partial = '';
  child.stderr.on('data', (b: Buffer) => {
    partial += b.toString();
    let nl: number;
    while ((nl = partial.indexOf('\n')) >= 0) {
      const line = partial.slice(0, nl);
      partial = partial.slice(nl + 1);
      let j: Proc['lines'][number];
      try {
        j = JSON.parse(line) as Proc['lines'][number];
      } catch {
        j = { msg: line };
      }
      lines.push(j);
      if (typeof j.url === 'string') resolveUrl(j.url);
      if (process.env.BERTH_TEST_VERBOSE) process.stderr.write(`[child] ${line}\n`);
    }
  });
  const exit = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return { child, lines, url, exit };
}

const pipelineYaml = (commands: string[]): string => `
version: "1"
steps:
  - name: work
    image: ${IMAGE}
    pull: never
    commands: ${JSON.stringify(commands)}
`;

async function enqueue(route: string, commands: string[]) {
  const repo = `p-${randomUUID().slice(0, 8)}`;
  const { build } = await sim.enqueueBuild({
    org: 'octo',
    repo,
    number: 1,
    pipeline: executable(pipelineYaml(commands), { org: 'octo', repo, number: 1 }),
    route,
  });
  return build.id!;
}

const stepStatus = (id: number): string | undefined => sim.stepsOf(id).find((s) => s.number === 2)?.status;

describe('berth start as a process', { timeout: 110_000 }, () => {
  it('SIGTERM drains: no new claims, the running build finishes and is reported, exit 0', async () => {
    const route = uniqueRoute('drain');
    const host = `drain-${randomUUID().slice(0, 6)}`;
    const p = startProcess(workerEnv(sim, host, route, { BERTH_DRAIN_GRACE: '60s' }));
    const id = await enqueue(route, ['echo begin', 'sleep 4', 'echo end']);
    await waitFor('the step to run', () => stepStatus(id) === 'running', 40_000);
    p.child.kill('SIGTERM');
    await waitFor('the drain to start', () => p.lines.some((l) => l.msg?.startsWith('draining')), 10_000);
    const second = await enqueue(route, ['echo never']);
    const code = await p.exit;
    expect(code).toBe(0);
    expect(sim.builds.get(id)).toMatchObject({ status: 'success' });
    expect(sim.stepLog(id, 2)!.toString()).toBe('$ echo begin\nbegin\n$ sleep 4\n$ echo end\nend\n');
    // The build queued during the drain was not claimed: still pending, still queued.
    expect(sim.builds.get(second)?.status).toBe('pending');
    expect(await sim.redis().llen(route)).toBe(1);
    expect(sim.workers.get(host)?.running_build_ids).toEqual([]);
    expect(labelled(host)).toEqual([]);
  });

  it('SIGTERM with a short drain grace: the build is canceled, reported and cleaned up; exit 0', async () => {
    const route = uniqueRoute('drain-grace');
    const host = `grace-${randomUUID().slice(0, 6)}`;
    const p = startProcess(workerEnv(sim, host, route, { BERTH_DRAIN_GRACE: '1s' }));
    const id = await enqueue(route, ['echo begin', 'sleep 120']);
    await waitFor('the step to run', () => stepStatus(id) === 'running', 40_000);
    const t0 = Date.now();
    p.child.kill('SIGTERM');
    expect(await p.exit).toBe(0);
    console.log(`drain with a 1 s grace and a 2 s stop grace ended in ${Date.now() - t0} ms`);
    expect(sim.builds.get(id)?.status).toBe('canceled');
    expect(sim.builds.get(id)?.error).toMatch(/shutting down/);
    expect(stepStatus(id)).toBe('canceled');
    expect(labelled(host)).toEqual([]);
  });

  it('a second signal cancels running builds at once', async () => {
    const route = uniqueRoute('force');
    const host = `force-${randomUUID().slice(0, 6)}`;
    const p = startProcess(workerEnv(sim, host, route, { BERTH_DRAIN_GRACE: '10m' }));
    const id = await enqueue(route, ['sleep 120']);
    await waitFor('the step to run', () => stepStatus(id) === 'running', 40_000);
    p.child.kill('SIGTERM');
    await waitFor('the drain to start', () => p.lines.some((l) => l.msg?.startsWith('draining')), 10_000);
    p.child.kill('SIGINT');
    expect(await p.exit).toBe(0);
    expect(sim.builds.get(id)?.status).toBe('canceled');
    expect(labelled(host)).toEqual([]);
  });

  it('SIGKILL mid-build, restart: containers reaped, the lost build reported as errored (registration by POST /register, no secret)', async () => {
    const route = uniqueRoute('reap');
    const host = `reap-${randomUUID().slice(0, 6)}`;
    const stateDir = tempDir('berth-reap-');
    const env = workerEnv(sim, host, route, { VELA_SERVER_SECRET: '', BERTH_STATE_DIR: stateDir });
    const register = async (p: Proc): Promise<void> => {
      const res = await fetch(`${await p.url}/register`, { method: 'POST', headers: { authorization: `Bearer ${sim.registrationToken(host)}` } });
      expect(res.status).toBe(200);
    };
    const first = startProcess(env);
    await register(first);
    const id = await enqueue(route, ['echo begin', 'sleep 120']);
    await waitFor('the step to run', () => stepStatus(id) === 'running', 40_000);
    first.child.kill('SIGKILL');
    await first.exit;
    expect(labelled(host).length).toBeGreaterThan(0);
    expect(sim.workers.get(host)?.running_build_ids).toEqual([id]);

    const second = startProcess(env);
    await register(second);
    await waitFor('the lost build to be reported', () => sim.builds.get(id)?.status === 'error', 40_000);
    expect(sim.builds.get(id)?.error).toMatch(/stopped unexpectedly/);
    await waitFor('running_builds to be cleared', () => sim.workers.get(host)?.running_build_ids.length === 0, 10_000);
    expect(labelled(host)).toEqual([]);
    expect(second.lines.some((l) => l.msg?.startsWith('reaped'))).toBe(true);
    second.child.kill('SIGTERM');
    expect(await second.exit).toBe(0);
  });
});
