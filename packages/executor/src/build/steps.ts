/**
 * Steps (go-vela/worker executor/linux/step.go): create, plan, exec, and running one step as the
 * build reaches it — its ruleset, its outputs, its lazy secrets.
 */
import { type Context, errOf } from '@berth/context';
import { type RuntimeWithHeldStart, supportsHeldStart } from '@berth/runtime';
import { type Container, RulesetError, shouldExecute } from '@berth/pipeline';
import { ExecutorError, messageOf } from '../errors.ts';
import type { BuildOutputs } from '../outputs/build-outputs.ts';
import { missingImageNames, NO_OUTPUTS, OUTPUTS_DIR, sameOutputs } from '../outputs/outputs.ts';
import type { LoadedSecret } from '../secrets.ts';
import { statusOfExit } from '../status.ts';
import { describeRuntimeError } from './checks.ts';
import type { ContainerRun } from './container-run.ts';
import { untilDone } from './contexts.ts';
import type { BuildCore } from './core.ts';
import { prepareEnvironment } from './environment.ts';

/** Streams a step's log (the executor's streamStep). */
export type StepStream = (ctx: Context, container: Container) => Promise<void>;

/** Prepares the step's environment (script, secrets) and sets its container up. */
export async function createStep(core: BuildCore, ctx: Context, container: Container): Promise<void> {
  const run = core.run(container);
  if (run.kind === 'init') return;
  if (!prepareStep(core, run)) return;
  run.setupAsked = true;
  await core.containerCall(run, 'assemble', () => core.runtime.setupContainer(ctx, container, core.build), ctx);
  run.setup = 'created';
}

/**
 * Prepares the step's environment (script, secrets; with outputs, the outputs so far, its compiled
 * form kept to prepare it again). `false` when its image needs an output: it is set up only when
 * it starts (`deferred`; Vela creates every container then).
 */
function prepareStep(core: BuildCore, run: ContainerRun): boolean {
  const container = run.container;
  if (core.outputs.active) {
    run.template = structuredClone(container);
    run.outputsSeen = core.outputs.current;
  }
  core.prepareEnvironment(run);
  if (run.template !== undefined && missingImageNames(run.template.image, container.environment).length > 0) {
    run.deferred = true;
    Object.assign(container, structuredClone(run.template));
    return false;
  }
  return true;
}

/** Loads the step's lazy secrets and marks it running. */
export async function planStep(core: BuildCore, ctx: Context, container: Container): Promise<void> {
  const run = core.run(container);
  if (run.kind === 'init') return;
  // The step's lazy secrets (loaded once, by the first step that needs them), and any not loaded yet.
  const late = new Map<string, LoadedSecret>();
  for (const ref of container.secrets) {
    const secret = core.build.secrets.find((s) => s.name === ref.source);
    if (secret === undefined || secret.origin !== null) continue;
    if (secret.pull !== 'step_start' && core.secrets.loaded.has(secret.name)) continue;
    if (!core.secrets.loaded.has(secret.name)) await core.containerCall(run, 'exec', () => core.secrets.load(ctx, secret), ctx);
    const loaded = core.secrets.loaded.get(secret.name);
    if (loaded !== undefined) late.set(secret.name, loaded);
  }
  // They arrive after substitution: they only reach the environment.
  if (late.size > 0) core.injectSecrets(run, 'all', late);
  run.status = 'running';
  run.started = Date.now();
  await core.reportStep(run);
}

/**
 * Runs the step's container and, unless it is detached, waits for it to end; its exit code
 * makes its status. Rejects when it could not run or `ctx` ended.
 */
export async function execStep(core: BuildCore, ctx: Context, container: Container, stream: StepStream): Promise<void> {
  const run = core.run(container);
  if (run.kind === 'init') return;
  if (run.setup === 'held') {
    // Started ahead and held (setUpAhead): only the go signal is left.
    run.setup = 'created';
    run.unhold?.();
    const runtime = core.runtime as RuntimeWithHeldStart;
    await core.containerCall(run, 'exec', () => runtime.releaseContainer(ctx, container), ctx);
  } else {
    await core.containerCall(run, 'exec', () => core.runtime.runContainer(ctx, container, core.build), ctx);
  }
  run.ran = true;
  await core.requestStream(run, stream);
  if (container.detach) return;
  core.log.debug?.(`waiting for step ${container.name}`);
  const exit = await core.containerCall(run, 'exec', () => core.runtime.waitContainer(ctx, container), ctx, 1);
  core.log.debug?.(`step ${container.name} exited with ${exit.exitCode}`);
  run.exited = true;
  run.exitCode = exit.exitCode;
  container.exit_code = exit.exitCode;
  run.status = statusOfExit(exit.exitCode);
  run.finished = Date.now();
  if (run.status === 'failure') {
    const reason = exit.reason !== undefined && !['', 'Error', 'Completed'].includes(exit.reason) ? ` (${exit.reason})` : '';
    run.error = `exited with code ${exit.exitCode}${reason}`;
    if (!container.ruleset.continue) core.record.stepFailed();
  }
  await core.reportStep(run);
}

/**
 * Runs one step as the build reaches it: its ruleset against `status()` (skipped when it does not
 * match), its setup again with the outputs so far, plan, its late setup, and exec, then the outputs
 * it wrote. A skipped step's container set up ahead ({@link setUpAhead}) is removed at once.
 */
export async function runStep(core: BuildCore, ctx: Context, step: Container, status: () => string, stream: StepStream): Promise<void> {
  if (ctx.signal.aborted) throw errOf(ctx);
  const run = core.run(step);
  let execute: boolean;
  try {
    execute = shouldExecute(step, { ...core.options.ruleData, status: status() });
  } catch (error) {
    const detail = error instanceof RulesetError ? `cannot evaluate its ruleset: ${error.message}` : messageOf(error);
    run.status = 'error';
    run.error = detail;
    run.finished = Date.now();
    await core.reportStep(run);
    throw new ExecutorError('exec', `step "${step.name}"`, detail, { cause: error });
  }
  if (!execute) {
    run.status = 'skipped';
    await core.reportStep(run);
    await removeUnrun(core, ctx, run);
    return;
  }
  if (run.template !== undefined && (run.deferred || !sameOutputs(run.outputsSeen ?? NO_OUTPUTS, core.outputs.current))) {
    // Prepared with other outputs (a step before it wrote some): set up again with the outputs now,
    // and not by the chain ahead meanwhile (setUpAhead).
    run.prefetch = false;
    await settleAhead(run);
    await setupWithOutputs(core, ctx, run, run.template);
  }
  await planStep(core, ctx, step);
  // A late step not set up yet (a lazy secret, or set up again with outputs) is set up once planStep loaded its secrets.
  await setUpLate(core, ctx, run);
  await execStep(core, ctx, step, stream);
  if (core.outputs.active && run.exited) await pollOutputs(core, ctx, run);
}

/**
 * Prepares the step again from its compiled form with the outputs so far and sets its container
 * up (again): go-vela/worker executor/linux/build.go ExecBuild lays the outputs on the step
 * (outputs.Process) and substitutes it just before PlanStep and ExecStep. An image `${KEY}` no
 * output gave fails the step and the build, naming the step, the image and the key. A container
 * set up before (with other outputs; held ahead: never released) is removed first, with no log. A
 * late step is left to {@link setUpLate}, after planStep: a lazy secret then reaches its container.
 */
async function setupWithOutputs(core: BuildCore, ctx: Context, run: ContainerRun, template: Container): Promise<void> {
  const fresh = prepareWithOutputs(core, run, template);
  const missing = missingImageNames(template.image, fresh.environment);
  if (missing.length > 0) {
    const names = missing.map((name) => `\${${name}}`).join(', ');
    const detail = `image "${template.image}" needs ${names}, which no step before it wrote to ${OUTPUTS_DIR} (.env, masked.env, base64.env or masked.base64.env): write it there in an earlier step, or set it in the step's environment`;
    run.status = 'error';
    run.error = core.mask(detail);
    run.finished = Date.now();
    run.started ??= run.finished;
    await core.reportStep(run);
    throw new ExecutorError('exec', `step "${run.container.name}"`, run.error);
  }
  const container = run.container;
  // Also one whose setup ahead failed: the runtime may have created it, and its name is the new one's.
  if (run.setup !== 'none' || run.setupAsked) {
    await core.containerCall(run, 'exec', () => core.runtime.removeContainer(ctx, container), ctx);
    run.setup = 'none';
    run.setupAsked = false;
    run.unhold?.();
  }
  Object.assign(container, fresh);
  run.deferred = false;
  if (run.late) return;
  run.setupAsked = true;
  await core.containerCall(run, 'exec', () => core.runtime.setupContainer(ctx, container, core.build), ctx);
  run.setup = 'created';
}

/** The step prepared afresh from its compiled form with the outputs so far (its notes made again). */
function prepareWithOutputs(core: BuildCore, run: ContainerRun, template: Container): Container {
  const fresh = structuredClone(template);
  run.notes.length = 0;
  const outputs = core.outputs.current;
  core.note(run, prepareEnvironment(fresh, 'step', core.workerVariables(), core.secrets.loaded, outputs));
  run.outputsSeen = outputs;
  return fresh;
}

/** Waits for the setup started ahead of the step, if any, to settle (a failure is ignored: the step is set up again). */
async function settleAhead(run: ContainerRun): Promise<void> {
  await run.creating?.catch(() => undefined);
  run.creating = undefined;
}

/**
 * Reads the outputs through the step that just ended (Vela polls before each next step, which
 * reads the same files) and masks their masked values from now on. A file that cannot be read
 * errors the build, as Vela's poll error does; content that cannot be used is warned about.
 */
async function pollOutputs(core: BuildCore, ctx: Context, run: ContainerRun): Promise<void> {
  let polled: Awaited<ReturnType<BuildOutputs['poll']>>;
  try {
    polled = await core.outputs.poll(ctx, core.build, run.container);
  } catch (error) {
    if (ctx.signal.aborted) throw errOf(ctx);
    throw core.executorError('exec', `step "${run.container.name}"`, new Error(`unable to read its outputs: ${describeRuntimeError(error)}`, { cause: error }));
  }
  for (const value of polled.masked) {
    core.init.writer?.addSecrets(value);
    for (const other of core.runs.values()) other.writer?.addSecrets(value);
  }
  for (const warning of polled.warnings) core.log.warn?.(`step ${run.container.name}: ${warning}`);
}

/** The image's description for the init log, or why there is none yet (its image needs outputs). */
async function inspectStepImage(core: BuildCore, ctx: Context, step: Container): Promise<string> {
  const run = core.run(step);
  if (run.deferred) return `> Step image ${step.image} is set when the step starts: it uses outputs of earlier steps\n`;
  return core.runtime.inspectImage(ctx, step);
}

// ---- late setup (issue 28: the next step's container is created while the current one runs) ----

/** A step's image, inspected for the init log before its container exists. */
type Inspection = { ok: true; text: string } | { ok: false };

/**
 * Whether the step's container is set up as the build reaches it rather than in assembleBuild: the
 * runtime sets each container up on its own (`setupWhileRunning`; Docker, not Kubernetes, whose pod
 * holds every container), and its pull policy does not pull at setup (`not_present`, `never`: its
 * image is inspected in assembleBuild, and one that is missing is set up there as before, pulled or
 * refused). With outputs, one whose image needs an output is set up when it starts (`deferred`),
 * and one set up ahead with outputs that are no longer the build's is set up again ({@link runStep}).
 */
function setsUpLate(core: BuildCore, container: Container): boolean {
  return core.runtime.setupWhileRunning === true && (container.pull === 'not_present' || container.pull === 'never');
}

/** True when the step takes a secret loaded only when it starts (`pull: step_start`): it reaches the environment in planStep. */
function takesLazySecret(core: BuildCore, container: Container): boolean {
  return container.secrets.some((ref) => {
    const secret = core.build.secrets.find((s) => s.name === ref.source);
    return secret !== undefined && secret.origin === null && secret.pull === 'step_start';
  });
}

/**
 * Creates the steps (the build's, or a stage's) for assembleBuild, each image inspected into the
 * init log in order. Where the runtime allows it ({@link setsUpLate}), a step's environment is
 * prepared here and its container set up later; the images of those steps are inspected first,
 * each distinct image once and all at once. One whose inspection fails is set up here as before
 * (a missing image is pulled or refused by its pull policy, with the runtime's words).
 */
export async function createSteps(core: BuildCore, ctx: Context, steps: readonly Container[]): Promise<void> {
  const inspections = new Map<string, Promise<Inspection>>();
  const keyOf = (step: Container): string => `${step.pull}\u0000${step.image}`;
  for (const step of steps) {
    const run = core.run(step);
    if (run.kind === 'init' || !setsUpLate(core, step) || !prepareStep(core, run)) continue;
    run.late = true;
    run.prefetch = !takesLazySecret(core, step);
    const key = keyOf(step);
    if (!inspections.has(key)) {
      inspections.set(
        key,
        core.runtime.inspectImage(ctx, step).then(
          (text): Inspection => ({ ok: true, text }),
          (): Inspection => ({ ok: false }),
        ),
      );
    }
  }
  for (const step of steps) {
    const run = core.run(step);
    if (run.kind === 'init') continue;
    await core.initLine(`> Preparing step image ${step.image}...\n`);
    const inspection = run.late ? await inspections.get(keyOf(step)) : undefined;
    if (inspection?.ok === true) {
      await core.initLine(inspection.text);
      continue;
    }
    if (run.late) {
      // Set up here after all: the image is missing (or could not be inspected).
      run.late = false;
      run.prefetch = false;
      run.setupAsked = true;
      await core.containerCall(run, 'assemble', () => core.runtime.setupContainer(ctx, step, core.build), ctx);
      run.setup = 'created';
    } else if (!run.deferred) {
      await createStep(core, ctx, step);
    }
    await core.initLine(await inspectStepImage(core, ctx, step));
  }
}

/**
 * Sets the containers of `steps` (the build's, or a stage's) up in the background, one after the
 * other, ahead of the build reaching them: started once the build is assembled, so that the first
 * step's container is set up while services start and each next one while the steps before it run,
 * one create at a time (creates all at once would slow the engine's starts and exits). Only steps
 * set up late whose environment is complete (no lazy secret), not reached yet (`pending`); it stops
 * once exec is over. A failure is reported when the step is reached ({@link setUpLate}); a step
 * that is then skipped has its container removed.
 *
 * Where the runtime offers the held start ({@link holds}), a step's container is also started
 * ahead, held until execStep releases it: at the step before it ending, only the release is left
 * (Docker: a newline on its stdin, instead of a start of ~250 ms). At most {@link HELD_AHEAD} are
 * held (or being held) at once; the chain waits for a place, given back when a held step is
 * released or its container removed (skipped by its ruleset, build over).
 */
export function setUpAhead(core: BuildCore, ctx: Context, steps: readonly Container[]): void {
  const places = new HeldPlaces(HELD_AHEAD);
  const stopped = (): boolean => core.aheadStopped || ctx.signal.aborted;
  const ahead = (run: ContainerRun): boolean => run.late && run.prefetch && run.status === 'pending' && run.creating === undefined && run.setup === 'none';
  const chain = async (): Promise<void> => {
    for (const step of steps) {
      if (stopped()) return;
      const run = core.run(step);
      if (!ahead(run)) continue;
      if (!holds(core, run)) {
        withCurrentOutputs(core, run);
        await startSetup(core, ctx, run).catch(() => undefined);
        continue;
      }
      if (!(await places.take(ctx, stopped, core.aheadOver.promise))) return;
      // Reached meanwhile (set up by setUpLate) or stopped: the place goes back.
      if (stopped() || !ahead(run)) {
        places.give();
        continue;
      }
      withCurrentOutputs(core, run);
      // Not awaited: up to HELD_AHEAD holds at once (a hold is a create and a start, ~250 ms on a
      // quiet engine; one after the other they fall behind quick steps).
      void startHold(core, ctx, run, places).catch(() => undefined);
    }
  };
  void chain();
}

/**
 * With outputs: prepares the step again before its container is set up ahead when the outputs
 * changed since it was prepared (a step before it wrote some). The outputs may still change before
 * the step is reached: {@link runStep} then sets it up again.
 */
function withCurrentOutputs(core: BuildCore, run: ContainerRun): void {
  if (run.template === undefined || sameOutputs(run.outputsSeen ?? NO_OUTPUTS, core.outputs.current)) return;
  Object.assign(run.container, prepareWithOutputs(core, run, run.template));
}

/**
 * How many containers one chain ({@link setUpAhead}) keeps started and held ahead of the build at
 * once, holds under way included: the next step's and the one after, two holds at a time. One at a
 * time fell behind quick steps (a hold took ~0.6–1 s at load 7–10 on the 2-core machine; each quick
 * step then waited for its hold: per-step overhead p50 859 ms against 341 ms with two at once, same
 * load); three gained no more (the engine's exit handling slows as starts run beside it). Each held
 * container is a running process and its shim waiting for its step, hence a bound.
 */
const HELD_AHEAD = 2;

/** The places of one chain for containers held ahead: taken before a hold, given back at its release or removal. */
class HeldPlaces {
  #free: number;
  #wake: (() => void) | undefined;

  constructor(places: number) {
    this.#free = places;
  }

  /** Takes a place, waiting for one; `false` when `ctx` ended or the chain was stopped first. */
  async take(ctx: Context, stopped: () => boolean, over: Promise<void>): Promise<boolean> {
    while (this.#free === 0) {
      const { promise, resolve } = Promise.withResolvers<void>();
      this.#wake = resolve;
      await untilDone(ctx, Promise.race([promise, over])).catch(() => undefined);
      this.#wake = undefined;
      if (stopped()) return false;
    }
    this.#free--;
    return true;
  }

  give(): void {
    this.#free++;
    this.#wake?.();
  }
}

/**
 * Whether the chain starts the step's container held (the runtime's `heldStart`, contract 1.4)
 * rather than only creating it: a step running a script (`commands`, which the executor made its
 * build script), not detached. The runtime may still decline (holdContainer resolves `false`): the
 * container is then set up as usual.
 */
function holds(core: BuildCore, run: ContainerRun): boolean {
  return supportsHeldStart(core.runtime) && run.kind === 'step' && !run.container.detach && run.container.commands.length > 0;
}

/** Starts the step's container held ahead, in one of the chain's places; not held after all, it is set up as usual. */
function startHold(core: BuildCore, ctx: Context, run: ContainerRun, places: HeldPlaces): Promise<void> {
  let given = false;
  run.unhold = () => {
    if (given) return;
    given = true;
    places.give();
  };
  const runtime = core.runtime as RuntimeWithHeldStart;
  run.setupAsked = true;
  const creating = Promise.resolve()
    .then(() => runtime.holdContainer(ctx, run.container, core.build))
    .then(async (held) => {
      if (held) {
        run.setup = 'held';
        return;
      }
      run.unhold?.();
      await core.runtime.setupContainer(ctx, run.container, core.build);
      run.setup = 'created';
    });
  // Awaited when the step is reached, or by destroy; never an unhandled rejection meanwhile.
  creating.catch(() => run.unhold?.());
  run.creating = creating;
  return creating;
}

function startSetup(core: BuildCore, ctx: Context, run: ContainerRun): Promise<void> {
  run.setupAsked = true;
  const creating = Promise.resolve()
    .then(() => core.runtime.setupContainer(ctx, run.container, core.build))
    .then(() => {
      run.setup = 'created';
    });
  // Awaited when the step is reached, or by destroy; never an unhandled rejection meanwhile.
  creating.catch(() => undefined);
  run.creating = creating;
  return creating;
}

/** Sets the late step's container up now, or waits for the setup started ahead; records a failure on the step. */
async function setUpLate(core: BuildCore, ctx: Context, run: ContainerRun): Promise<void> {
  if (!run.late || run.setup !== 'none') return;
  const creating = run.creating ?? startSetup(core, ctx, run);
  await core.containerCall(run, 'exec', () => creating, ctx);
}

/**
 * Removes the container set up ahead for a step that is not run (its ruleset did not match), as
 * soon as its setup settled, also when that setup failed (the runtime may have created it). A
 * removal that fails is left to destroyBuild.
 */
async function removeUnrun(core: BuildCore, ctx: Context, run: ContainerRun): Promise<void> {
  if (run.creating === undefined) return;
  await run.creating.catch(() => undefined);
  try {
    await core.runtime.removeContainer(ctx, run.container);
    run.setup = 'none';
    run.setupAsked = false;
  } catch (error) {
    core.log.warn?.(`step ${run.container.name}: removing its container (it did not run): ${messageOf(error)}`);
  }
  run.unhold?.();
}
