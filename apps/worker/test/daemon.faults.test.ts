// Faults from vela-sim (5xx, timeouts, resets, lost answers) on status and log calls: retried,
// and the log the server ends up with is the container's output, masked, once, in order.
import { randomUUID } from 'node:crypto';
import { VelaSim } from '@berth/vela-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IMAGE, type WorkerHandle, executable, startWorker, uniqueRoute, waitFor, waitForBuildOver } from './daemon-harness.ts';

let sim: VelaSim;
let worker: WorkerHandle;
const route = uniqueRoute('faults');
const SECRET = `pw-${randomUUID().slice(0, 8)}`;

beforeAll(async () => {
  sim = await VelaSim.start();
  // 1 s per attempt: a held request (timeout fault) costs a second, then it is retried.
  worker = await startWorker(sim, { route, env: { BERTH_SERVER_TIMEOUT: '1s', VELA_LOG_LEVEL: 'info' } });
  await waitFor('the worker to register', () => worker.daemon.registered);
});

afterAll(async () => {
  await worker?.stop();
  await sim?.close();
});

async function enqueue(yaml: (repo: string) => string) {
  const repo = `f-${randomUUID().slice(0, 8)}`;
  sim.addSecret('native', 'repo', 'octo', repo, 'password', { value: SECRET });
  const { build } = await sim.enqueueBuild({
    org: 'octo',
    repo,
    number: 1,
    pipeline: executable(yaml(repo), { org: 'octo', repo, number: 1 }),
    route,
    noPush: true,
  });
  return { id: build.id!, repo, push: () => sim.redis().rpush(route, sim.sign(JSON.stringify({ build, item_version: 3 }))) };
}

describe('server faults', { timeout: 110_000 }, () => {
  it('5xx, timeouts, resets and lost answers on build, step and log calls are retried; the stored log is the output, masked, once, in order', async () => {
    const { id, repo, push } = await enqueue(
      (repo) => `
version: "1"
secrets:
  - name: password
    key: octo/${repo}/password
    engine: native
    type: repo
steps:
  - name: count
    image: ${IMAGE}
    pull: never
    secrets: [ password ]
    commands:
      - for i in $(seq 1 40); do echo "line $i pw=$PASSWORD"; sleep 0.1; done
`,
    );
    const B = `/api/v1/repos/octo/${repo}/builds/1`;
    sim.fail({ method: 'PUT', path: B, kind: 'status', status: 503, times: 2 });
    sim.fail({ method: 'GET', path: `/api/v1/secrets/native/repo/octo/${repo}/password`, kind: 'timeout', times: 1 });
    sim.fail({ method: 'PUT', path: `${B}/steps/2`, kind: 'timeout', times: 1 });
    sim.fail({ method: 'PUT', path: `${B}/steps/2`, kind: 'status', status: 500, times: 1 });
    sim.fail({ method: 'PUT', path: `${B}/steps/2/logs`, kind: 'timeout', times: 1 });
    sim.fail({ method: 'PUT', path: `${B}/steps/2/logs`, kind: 'status', status: 502, times: 1 });
    sim.fail({ method: 'PUT', path: `${B}/steps/2/logs`, kind: 'reset', times: 1 });
    sim.fail({ method: 'PUT', path: `${B}/steps/2/logs`, kind: 'non-json', times: 1, when: 'after' });
    await push();
    await waitForBuildOver(sim, id, 90_000);
    expect(sim.builds.get(id)).toMatchObject({ status: 'success' });
    expect(sim.stepsOf(id).find((s) => s.number === 2)).toMatchObject({ status: 'success' });
    const expected =
      ['$ for i in $(seq 1 40); do echo "line $i pw=$PASSWORD"; sleep 0.1; done', ...Array.from({ length: 40 }, (_, i) => `line ${i + 1} pw=***`)].join('\n') +
      '\n';
    expect(sim.stepLog(id, 2)!.toString('utf8')).toBe(expected);
    const faulted = sim.calls.filter((c) => c.fault !== undefined && c.path.startsWith(`/api/v1/`) && (c.path.startsWith(B) || c.path.includes(repo)));
    expect(faulted.length).toBeGreaterThanOrEqual(8);
    expect(worker.logged(/retrying/).length).toBeGreaterThan(0);
    // Still serving.
    expect((await fetch(`${worker.daemon.url}/health`)).status).toBe(200);
  });

  it('a 10 MiB log with failing uploads: stored whole, in order, with under 3x its size uploaded', async () => {
    const lines = 209_716;
    const awk = `awk 'BEGIN { for (i = 0; i < ${lines}; i++) printf "%08d xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\\n", i }'`;
    const { id, repo, push } = await enqueue(
      () => `
version: "1"
steps:
  - name: big
    image: ${IMAGE}
    pull: never
    commands:
      - ${JSON.stringify(awk)}
`,
    );
    const logPath = `/api/v1/repos/octo/${repo}/builds/1/steps/2/logs`;
    sim.fail({ method: 'PUT', path: logPath, kind: 'status', status: 500, times: 2 });
    sim.fail({ method: 'PUT', path: logPath, kind: 'timeout', times: 1 });
    await push();
    await waitForBuildOver(sim, id, 90_000);
    expect(sim.builds.get(id)?.status).toBe('success');
    let content = '';
    for (let i = 0; i < lines; i++) content += `${String(i).padStart(8, '0')} ${'x'.repeat(41)}\n`;
    const stored = sim.stepLog(id, 2)!.toString('utf8');
    expect(stored.length).toBe(`$ ${awk}\n`.length + content.length);
    expect(stored === `$ ${awk}\n${content}`).toBe(true);
    const sent = sim.callsTo('PUT', logPath).reduce((n, c) => n + (c.logDataBytes ?? 0), 0);
    console.log(`10 MiB log: ${sim.callsTo('PUT', logPath).length} uploads, ${sent} bytes, ratio ${(sent / stored.length).toFixed(2)}`);
    expect(sent).toBeLessThan(3 * stored.length);
  });
});
