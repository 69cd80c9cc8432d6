// Vela's outputs through `berth start` against vela-sim, Redis and Docker: on when
// VELA_EXECUTOR_OUTPUTS_IMAGE is set (go-vela/worker cmd/vela-worker/run.go builds the outputs
// container only then), off otherwise.
import { randomUUID } from 'node:crypto';
import { VelaSim } from '@berth/vela-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IMAGE, type WorkerHandle, executable, labelled, startWorker, uniqueRoute, waitFor, waitForBuildOver } from './daemon-harness.ts';

const TOKEN = `out-${randomUUID().slice(0, 8)}`;
const TAG = IMAGE.split(':').at(-1) ?? '1.35';
const REPO_IMAGE = IMAGE.slice(0, IMAGE.lastIndexOf(':'));

let sim: VelaSim;
let on: WorkerHandle;
let off: WorkerHandle;
const routeOn = uniqueRoute('outputs-on');
const routeOff = uniqueRoute('outputs-off');

beforeAll(async () => {
  sim = await VelaSim.start();
  on = await startWorker(sim, { route: routeOn, env: { VELA_EXECUTOR_OUTPUTS_IMAGE: 'alpine:3' } });
  off = await startWorker(sim, { route: routeOff });
  await waitFor('the workers to register', () => on.daemon.registered && off.daemon.registered);
});

afterAll(async () => {
  await on?.stop();
  await off?.stop();
  await sim?.close();
});

const yaml = `
version: "1"
steps:
  - name: write
    image: ${IMAGE}
    pull: never
    commands:
      - echo "TAG=${TAG}" > /vela/outputs/.env
      - echo "TOKEN=$(echo ${Buffer.from(TOKEN).toString('base64')} | base64 -d)" > /vela/outputs/masked.env
  - name: read
    image: ${REPO_IMAGE}:\${TAG}
    pull: never
    commands:
      - echo "tag=$TAG token=$TOKEN"
`;

async function run(route: string) {
  const repo = `r-${randomUUID().slice(0, 8)}`;
  const pipeline = executable(yaml, { org: 'octo', repo, number: 1 });
  const { build } = await sim.enqueueBuild({ org: 'octo', repo, number: 1, pipeline, route });
  const id = build.id!;
  await waitForBuildOver(sim, id);
  return { id, build: sim.builds.get(id)! };
}

describe('berth start with outputs (Docker)', { timeout: 90_000 }, () => {
  it('with VELA_EXECUTOR_OUTPUTS_IMAGE: the later step gets the outputs, its image tag too, the masked value masked', async () => {
    const { id, build } = await run(routeOn);
    expect(build.error).toBeUndefined();
    expect(build.status).toBe('success');
    const log = sim.stepLog(id, 3)!.toString('utf8');
    expect(log).toContain(`tag=${TAG} token=***\n`);
    for (const n of [1, 2, 3]) expect(sim.stepLog(id, n)?.toString('utf8') ?? '').not.toContain(TOKEN);
    await waitFor('nothing left', () => labelled(on.hostname).length === 0);
  });

  it('without it: the build is refused at its start, naming the step and saying how to turn outputs on', async () => {
    const { build } = await run(routeOff);
    expect(build.status).toBe('error');
    expect(build.error).toContain(`step "read" (image "${REPO_IMAGE}:\${TAG}" needs \${TAG})`);
    expect(build.error).toContain('set VELA_EXECUTOR_OUTPUTS_IMAGE');
  });
});
