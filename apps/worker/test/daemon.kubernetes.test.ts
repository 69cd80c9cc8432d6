// End to end on the Kubernetes runtime: `berth start --runtime kubernetes` against kube-sim
// (Docker-backed pods), vela-sim and real Redis.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { randomUUID } from 'node:crypto';
import { type KubeSim, startKubeSim } from '@berth/kube-sim';
import { VelaSim } from '@berth/vela-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IMAGE, type WorkerHandle, executable, startWorker, uniqueRoute, waitFor, waitForBuildOver } from './daemon-harness.ts';

const PAUSE = process.env.BERTH_PAUSE_IMAGE ?? 'berth/pause:1';
const SECRET = `k8s-${randomUUID().slice(0, 8)}`;

let sim: VelaSim;
let kube: KubeSim;
let worker: WorkerHandle;
const route = uniqueRoute('k8s');

beforeAll(async () => {
  sim = await VelaSim.start();
  kube = await startKubeSim({ imagePullBackoff: { initialMs: 200, maxMs: 1_000 }, bookmarkIntervalMs: 2_000 });
  worker = await startWorker(sim, {
    route,
    env: {
      VELA_RUNTIME_DRIVER: 'kubernetes',
      VELA_RUNTIME_CONFIG: kube.kubeconfigPath,
      VELA_RUNTIME_NAMESPACE: 'default',
      BERTH_KUBERNETES_PAUSE_IMAGE: PAUSE,
    },
  });
  await waitFor('the worker to register', () => worker.daemon.registered);
});

afterAll(async () => {
  await worker?.stop();
  await kube?.close();
  await sim?.close();
});

// kubectl, asynchronously: kube-sim serves from this very process.
const podsOf = async (workerId: string): Promise<string[]> =>
  (
    await promisify(execFile)(
      'kubectl',
      ['--kubeconfig', kube.kubeconfigPath, 'get', 'pods', '-n', 'default', '-l', `berth.dev/worker=${workerId}`, '-o', 'name'],
      { encoding: 'utf8' },
    )
  ).stdout
    .split('\n')
    .filter(Boolean);

describe('berth start on Kubernetes (kube-sim)', { timeout: 110_000 }, () => {
  it('pops, runs and reports a build in a pod: statuses and logs in order, the secret masked, the pod removed', async () => {
    const repo = `k-${randomUUID().slice(0, 8)}`;
    sim.addSecret('native', 'repo', 'octo', repo, 'api_token', { value: SECRET });
    const pipeline = executable(
      `
version: "1"
secrets:
  - name: api_token
    key: octo/${repo}/api_token
    engine: native
    type: repo
steps:
  - name: first
    image: ${IMAGE}
    pull: never
    secrets: [ api_token ]
    commands:
      - echo "token is $API_TOKEN"
  - name: second
    image: ${IMAGE}
    pull: never
    commands:
      - echo two
`,
      { org: 'octo', repo, number: 1 },
    );
    const { build } = await sim.enqueueBuild({ org: 'octo', repo, number: 1, pipeline, route });
    const id = build.id!;
    await waitForBuildOver(sim, id, 90_000, 250);
    expect(sim.builds.get(id)).toMatchObject({ status: 'success', runtime: 'kubernetes', host: worker.hostname });
    expect(sim.stepsOf(id).map((s) => [s.name, s.status])).toEqual([
      ['init', 'success'],
      ['first', 'success'],
      ['second', 'success'],
    ]);
    expect(sim.stepLog(id, 2)!.toString()).toBe('$ echo "token is $API_TOKEN"\ntoken is ***\n');
    expect(sim.stepLog(id, 3)!.toString()).toBe('$ echo two\ntwo\n');
    const puts = sim
      .callsTo('PUT', new RegExp(`^/api/v1/repos/octo/${repo}/builds/1/steps/[23]$`))
      .map((c) => `${c.path.slice(-1)}:${/"status":"(\w+)"/.exec(c.summary)?.[1]}`);
    expect(puts).toEqual(['2:running', '2:success', '3:running', '3:success']);
    await waitFor('the pod to be gone', async () => (await podsOf(worker.hostname)).length === 0, 30_000);
    const metrics = await (await fetch(`${worker.daemon.url}/metrics`)).text();
    expect(metrics).toMatch(/berth_worker_kubernetes_watch_restarts_total \d+/);
  });
});
