/**
 * Stages (go-vela/worker executor/linux/stage.go): create their steps, wait for the stages they
 * `need`, run their steps in order.
 */
import { type Context, isContextError } from '@berth/context';
import type { Stage } from '@berth/pipeline';
import { ExecutorError, messageOf } from '../errors.ts';
import { untilDone } from './contexts.ts';
import type { BuildCore } from './core.ts';
import { createSteps, runStep, type StepStream } from './steps.ts';

/** Creates every step of the stage, each image inspected into the init log. */
export async function createStage(core: BuildCore, ctx: Context, stage: Stage): Promise<void> {
  await core.initLine(`> Preparing step images for stage ${stage.name}...\n`);
  for (const step of stage.steps) step.environment['VELA_STEP_STAGE'] = stage.name;
  await createSteps(core, ctx, stage.steps);
}

/**
 * Waits for the stages this one `needs` (names of stages not in the build are ignored, as
 * Vela does). Rejects when one of them could not complete (an error, not a failed step) or `ctx` ends.
 */
export async function planStage(core: BuildCore, ctx: Context, stage: Stage): Promise<void> {
  for (const need of stage.needs) {
    const done = core.stageDone.get(need);
    if (done === undefined || need === stage.name) continue;
    try {
      await untilDone(ctx, done.promise);
    } catch (error) {
      if (isContextError(error)) throw error;
      throw new ExecutorError('exec', `stage "${stage.name}"`, `needs stage "${need}", which did not complete: ${messageOf(error)}`, { cause: error });
    }
  }
}

/**
 * Runs the stage's steps in order. Rulesets see the build's status, or — for an `independent`
 * stage — the stage's own, so a failure elsewhere does not skip its steps.
 */
export async function execStage(core: BuildCore, ctx: Context, stage: Stage, stream: StepStream): Promise<void> {
  let stageFailed = false;
  for (const step of stage.steps) {
    const run = core.run(step);
    await runStep(core, ctx, step, () => (stage.independent ? (stageFailed ? 'failure' : 'running') : core.record.ruleStatus), stream);
    if (run.status === 'failure' && !step.ruleset.continue) stageFailed = true;
  }
}
