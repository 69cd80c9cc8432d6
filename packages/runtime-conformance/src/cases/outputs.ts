import { OUTPUTS_PATH, supportsOutputs } from '@berth/runtime';
import { expect } from '../expect.ts';
import { conformanceBuild, conformanceStep } from '../builders.ts';
import { teardownBuild } from '../drive.ts';
import { CaseSkipped, expectExit, run, type ConformanceCase } from './shared.ts';

/**
 * The optional `outputs` capability (Runtime.setupOutputs / readOutput): Vela's outputs, which
 * go-vela/worker reads from its outputs sidecar (executor/linux/outputs.go outputSvc.poll,
 * runtime/docker/container.go PollOutputsContainer).
 */
export function outputsCases(): ConformanceCase[] {
  return [
    {
      group: 'outputs',
      name: `outputs: files steps write to ${OUTPUTS_PATH} are shared by the build and read through its containers`,
      capabilities: ['outputs'],
      optional: 'outputs',
      tools: ['printf', 'cat'],
      async run(h) {
        const runtime = await h.runtime();
        if (!supportsOutputs(runtime)) {
          // Declared (the suite runs the case only then, or when the plugin did not say): it must be there.
          if (h.options.capabilities === undefined)
            throw new CaseSkipped('the runtime does not offer the optional outputs capability (no setupOutputs/readOutput)');
          throw new Error(`${runtime.name} declares the optional outputs capability but its runtime lacks setupOutputs or readOutput`);
        }
        const build = conformanceBuild();
        const writer = conformanceStep(build, 'writer', 1, {
          image: h.options.image,
          script: [`printf 'TAG=1.35\\nSECRET="two words"\\n' > ${OUTPUTS_PATH}/.env`],
        });
        const reader = conformanceStep(build, 'reader', 2, { image: h.options.image, script: [`cat ${OUTPUTS_PATH}/.env`] });
        build.steps = [writer, reader];
        h.track(runtime, build);
        const ctx = h.ctx();
        await runtime.setupBuild(ctx, build);
        await runtime.createNetwork(ctx, build);
        await runtime.createVolume(ctx, build);
        await runtime.setupOutputs(ctx, build);
        for (const step of build.steps) await runtime.setupContainer(ctx, step, build);
        await runtime.assembleBuild(ctx, build);

        expectExit(await run(h, runtime, build, writer), 0, 'exit code of the writer');
        const written = await runtime.readOutput(h.ctx(), build, writer, '.env');
        expect(written === undefined ? undefined : Buffer.from(written).toString('utf8'), 'readOutput(.env) through the exited writer').toBe(
          'TAG=1.35\nSECRET="two words"\n',
        );
        expect(await runtime.readOutput(h.ctx(), build, writer, 'masked.env'), 'readOutput of a file no step wrote').toBeUndefined();
        const read = await run(h, runtime, build, reader);
        expect(read.logs).toBe('TAG=1.35\nSECRET="two words"\n');
        expectExit(read, 0);
        await teardownBuild(h.ctx(), runtime, build);
      },
    },
  ];
}
