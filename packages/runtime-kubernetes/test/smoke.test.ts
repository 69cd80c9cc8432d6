import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KubeSim } from '@berth/kube-sim';
import { runToCompletion, setupBuildResources, teardownBuild } from '@berth/runtime-conformance';
import { background } from '@berth/context';
import { buildOf, simRuntime, startSim } from './helpers.ts';

describe('smoke', () => {
  let sim: KubeSim;
  beforeAll(async () => {
    sim = await startSim();
  });
  afterAll(async () => {
    await sim?.close();
  });

  it('runs a two-step build', async () => {
    const runtime = await simRuntime(sim);
    const { build, steps } = buildOf(2, (i) => [`echo hello ${i}`, `exit ${i}`]);
    const ctx = background();
    await setupBuildResources(ctx, runtime, build);
    const results = [];
    for (const step of steps) results.push(await runToCompletion(runtime, build, step));
    await teardownBuild(ctx, runtime, build);
    await runtime.close();
    console.log(JSON.stringify(results.map((r) => [r.exit, r.logs])), JSON.stringify(sim.counters.snapshot()));
    expect(results.map((r) => r.exit.exitCode)).toEqual([0, 1]);
    expect(results.map((r) => r.logs)).toEqual(['hello 0\n', 'hello 1\n']);
  });
});
