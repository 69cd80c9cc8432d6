// Issue #15 item 5: executor.enforce-trusted-repos (default true). An untrusted repo running an
// image of the privileged allowlist errors (go-vela/worker executor/linux/step.go ExecStep
// ~197–205, service.go); a trusted repo runs it; with the setting off, anyone does.
import { randomUUID } from 'node:crypto';
import { type VelaSim } from '@berth/vela-sim';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IMAGE, type WorkerHandle, executable, uniqueRoute, waitForBuildOver, startRegistered, stopRegistered } from './daemon-harness.ts';

let sim: VelaSim;
let worker: WorkerHandle;
const route = uniqueRoute('trust');
const privileged = IMAGE.split(':')[0]!;

beforeAll(async () => {
  ({ sim, worker } = await startRegistered({ route, env: { VELA_RUNTIME_PRIVILEGED_IMAGES: privileged } }));
});

afterAll(() => stopRegistered({ sim, worker }));

async function run(trusted: boolean) {
  const repo = `r-${randomUUID().slice(0, 8)}`;
  const yaml = `
version: "1"
steps:
  - name: s
    image: ${IMAGE}
    pull: never
    commands: [ "echo ran" ]
`;
  const { build } = await sim.enqueueBuild({
    org: 'octo',
    repo,
    number: 1,
    pipeline: executable(yaml, { org: 'octo', repo, number: 1 }),
    route,
    repoFields: { trusted },
  });
  await waitForBuildOver(sim, build.id!);
  return { build: sim.builds.get(build.id!)!, log: sim.stepLog(build.id!, 2)?.toString('utf8') ?? '' };
}

describe('enforce-trusted-repos (Docker)', { timeout: 90_000 }, () => {
  it('an untrusted repo running an allow-listed privileged image errors, naming the image; nothing runs', async () => {
    const { build, log } = await run(false);
    expect(build.status).toBe('error');
    expect(build.error).toContain(`attempting to use privileged image (${IMAGE}) as untrusted repo`);
    expect(log).not.toContain('ran');
  });

  it('a trusted repo runs it', async () => {
    const { build, log } = await run(true);
    expect(build.status).toBe('success');
    expect(log).toContain('ran');
  });
});
