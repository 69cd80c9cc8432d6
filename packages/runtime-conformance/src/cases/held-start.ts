import { sleep } from '@berth/context';
import { type Runtime, type RuntimeWithHeldStart, supportsHeldStart } from '@berth/runtime';
import { conformanceBuild, conformanceStep } from '../builders.ts';
import { collectStream, setupBuildResources, teardownBuild } from '../drive.ts';
import { expect } from '../expect.ts';
import type { CaseHarness } from '../harness.ts';
import { CaseSkipped, type ConformanceCase, expectExit, expectGone, expectState, run } from './shared.ts';

/**
 * The optional `heldStart` capability (contract 1.4, `holdContainer` / `releaseContainer`): a
 * step's container started ahead and held until its step runs. What the executor relies on: a
 * held container runs nothing and logs nothing before its release; after it, its log is the
 * script's whole output and its exit the script's; one never released is removed.
 */
export function heldStartCases(): ConformanceCase[] {
  return [
    {
      group: 'heldStart',
      name: "a held container runs nothing and logs nothing until released; then its log is the whole output and its exit the script's",
      capabilities: [],
      optional: 'heldStart',
      async run(h) {
        const runtime = await heldRuntime(h);
        const ws = h.options.workspacePath;
        const build = conformanceBuild();
        const held = conformanceStep(build, 'held', 1, { image: h.options.image, directory: ws, script: [': > held-ran', 'echo released', 'exit 3'] });
        const probe = conformanceStep(build, 'probe', 2, { image: h.options.image, directory: ws, script: ['[ ! -e held-ran ]'] });
        // Held after assembleBuild, as the executor holds a step while the build runs (setupBuildResources sets up build.steps).
        build.steps = [probe];
        h.track(runtime, build);
        const ctx = h.ctx();
        await setupBuildResources(ctx, runtime, build);
        build.steps.push(held);
        expect(await runtime.holdContainer(ctx, held, build), 'holdContainer of a shell script (/bin/sh -c and one command)').toBe(true);
        // Time enough for a container that was not held to have run its script.
        await sleep(ctx, 1_000);
        await expectState(h, runtime, held, 'running', undefined, 'the state of the held container before its release');
        const probed = await run(h, runtime, build, probe);
        expectExit(probed, 0, 'exit code of a step testing that the held one did not run (held-ran must not exist)');
        await runtime.releaseContainer(ctx, held);
        const [logs, exit] = await Promise.all([collectStream(ctx, await runtime.tailContainer(ctx, held)), runtime.waitContainer(ctx, held)]);
        expect(logs.toString('utf8'), 'the log of the held container after its release').toBe('released\n');
        expectExit({ exit, logs: logs.toString('utf8') }, 3);
        await teardownBuild(ctx, runtime, build);
      },
    },
    {
      group: 'heldStart',
      name: 'a held container that is never released is removed by removeContainer, without running',
      capabilities: [],
      optional: 'heldStart',
      async run(h) {
        const runtime = await heldRuntime(h);
        const build = conformanceBuild();
        const held = conformanceStep(build, 'held', 1, { image: h.options.image, script: ['echo must-not-run'] });
        h.track(runtime, build);
        const ctx = h.ctx();
        await setupBuildResources(ctx, runtime, build);
        build.steps.push(held);
        expect(await runtime.holdContainer(ctx, held, build), 'holdContainer of a shell script (/bin/sh -c and one command)').toBe(true);
        await runtime.removeContainer(ctx, held);
        await expectGone(h, runtime, held);
        await teardownBuild(ctx, runtime, build);
      },
    },
  ];
}

/** A runtime of the harness with the held start, or the case is skipped (undeclared) or fails (declared, missing). */
async function heldRuntime(h: CaseHarness): Promise<RuntimeWithHeldStart> {
  const runtime: Runtime = await h.runtime();
  if (supportsHeldStart(runtime)) return runtime;
  // Declared (the suite runs the case only then, or when the plugin did not say): it must be there.
  if (h.options.capabilities === undefined)
    throw new CaseSkipped('the runtime does not offer the optional heldStart capability (no holdContainer/releaseContainer)');
  throw new Error(`${runtime.name} declares the optional heldStart capability but its runtime lacks holdContainer or releaseContainer`);
}
