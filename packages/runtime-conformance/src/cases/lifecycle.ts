import { setTimeout as delay } from 'node:timers/promises';
import { background, withCancel, withTimeout } from '@berth/context';
import { isRuntimeError } from '@berth/runtime';
import { expect } from '../expect.ts';
import type { ConformanceContainerFields } from '../builders.ts';
import { logSoFar } from '../drive.ts';
import { describeOutcome, pollUntil, rejectedWith, settleWithin } from '../harness.ts';
import { expectGone, expectNothingLeft, expectState, firstRejection, oneStep, type ConformanceCase } from './shared.ts';

/** The cases of the `cancellation` and `images` groups. */
export function lifecycleCases(): ConformanceCase[] {
  return [
    // ---- cancellation -------------------------------------------------------------------------
    {
      group: 'cancellation',
      name: 'waitContainer rejects with Canceled within 1 s of its ctx being cancelled and leaves the container running; removal then leaves nothing',
      tools: ['sleep'],
      async run(h) {
        const { runtime, build, step } = await oneStep(h, { script: ['sleep 30'] });
        await runtime.runContainer(h.ctx(), step, build);
        const running = await pollUntil(async () => (await runtime.inspectContainer(h.ctx(), step)).state === 'running', 10_000);
        if (!running) await expectState(h, runtime, step, 'running', undefined, 'the container runs');
        const [ctx, cancel] = withCancel(background());
        const waiting = runtime.waitContainer(ctx, step);
        await delay(200);
        const started = performance.now();
        cancel();
        const outcome = await settleWithin(waiting, h.options.timeouts.cancel + 4_000, started);
        expect(rejectedWith(outcome, 'Canceled'), describeOutcome(outcome)).toBe(true);
        expect(outcome.ms, describeOutcome(outcome)).toBeLessThan(h.options.timeouts.cancel);
        await expectState(h, runtime, step, 'running', undefined, 'the container still runs after the wait was cancelled');

        await runtime.removeContainer(h.ctx(), step);
        await runtime.removeBuild(h.ctx(), build);
        await expectGone(h, runtime, step);
        expectNothingLeft(await runtime.reap(h.ctx(), h.workerIdOf(runtime)));
      },
    },
    {
      group: 'cancellation',
      name: 'waitContainer rejects with DeadlineExceeded within 1 s of its ctx deadline',
      tools: ['sleep'],
      async run(h) {
        const { runtime, build, step } = await oneStep(h, { script: ['sleep 30'] });
        await runtime.runContainer(h.ctx(), step, build);
        const [ctx, cancel] = withTimeout(background(), 300);
        const started = performance.now();
        const outcome = await settleWithin(runtime.waitContainer(ctx, step), 300 + h.options.timeouts.cancel + 4_000, started);
        cancel();
        const why =
          outcome.status === 'fulfilled' ? `${describeOutcome(outcome)}; the container's log:\n${await logSoFar(runtime, step)}` : describeOutcome(outcome);
        expect(rejectedWith(outcome, 'DeadlineExceeded'), why).toBe(true);
        expect(outcome.ms - 300, why).toBeLessThan(h.options.timeouts.cancel);
      },
    },
    {
      group: 'cancellation',
      name: 'removeContainer stops a running container, a pending waitContainer then settles, and the container is gone',
      tools: ['sleep'],
      async run(h) {
        const { runtime, build, step } = await oneStep(h, { script: ['sleep 30'] }, { stopGraceMs: 1_000 });
        await runtime.runContainer(h.ctx(), step, build);
        const waiting = settleWithin(runtime.waitContainer(h.ctx(), step), 20_000);
        await pollUntil(async () => (await runtime.inspectContainer(h.ctx(), step)).state === 'running', 10_000);
        await runtime.removeContainer(h.ctx(), step);
        const outcome = await waiting;
        const settled = (outcome.status === 'fulfilled' && outcome.value.exitCode !== 0) || rejectedWith(outcome, 'NotFound', 'ContainerFailed');
        expect(settled, `waitContainer ${describeOutcome(outcome)}`).toBe(true);
        await expectGone(h, runtime, step);
        await runtime.removeContainer(h.ctx(), step);
      },
    },

    // ---- images -------------------------------------------------------------------------------
    {
      group: 'images',
      name: 'a missing image with pull policy never is reported as ImageNotFound, promptly',
      capabilities: ['images'],
      async run(h) {
        const fields: ConformanceContainerFields = { image: h.options.missingImage, pull: 'never', script: ['echo should-not-run'] };
        const started = performance.now();
        const failure = await firstRejection(h, fields, h.options.timeouts.imageError);
        expect(failure, 'some lifecycle method must reject').toBeDefined();
        expect(isRuntimeError(failure?.error, 'ImageNotFound'), `${failure?.operation} ${failure?.outcome}`).toBe(true);
        expect(performance.now() - started).toBeLessThan(h.options.timeouts.imageError);
      },
    },
    {
      group: 'images',
      name: 'an invalid image reference is reported as InvalidConfig, promptly',
      capabilities: ['images'],
      async run(h) {
        const fields: ConformanceContainerFields = { image: h.options.invalidImage, script: ['echo should-not-run'] };
        const started = performance.now();
        const failure = await firstRejection(h, fields, h.options.timeouts.imageError);
        expect(failure, 'some lifecycle method must reject').toBeDefined();
        expect(isRuntimeError(failure?.error, 'InvalidConfig'), `${failure?.operation} ${failure?.outcome}`).toBe(true);
        expect(performance.now() - started).toBeLessThan(h.options.timeouts.imageError);
      },
    },
  ];
}
