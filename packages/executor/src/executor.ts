/**
 * The executor: runs one compiled pipeline on a Runtime, as go-vela/worker's `executor/linux`
 * does — create, plan, assemble, exec, stream, destroy — and reports status and logs.
 */
import { type Context, errOf, TaskGroup, withoutCancel } from '@berth/context';
import type { Build, Container, Stage } from '@berth/pipeline';
import type { Runtime, RuntimeEvent } from '@berth/runtime';
import { checkStages, knownNames } from './build/checks.ts';
import type { ContainerRun } from './build/container-run.ts';
import { type BuildContexts, type Deferred, deferred, makeBuildContexts } from './build/contexts.ts';
import { BuildCore, INIT_NAME } from './build/core.ts';
import { removeBuildResources } from './build/destroy.ts';
import { createStage, execStage, planStage } from './build/stages.ts';
import { initFailureStatus, timeoutMessage } from './build/state.ts';
import { createStep, createSteps, execStep, planStep, runStep, setUpAhead } from './build/steps.ts';
import { ExecutorError, messageOf, type Phase } from './errors.ts';
import type { ExecutorOptions } from './options.ts';
import { OUTPUTS_DIR } from './outputs/outputs.ts';
import type { BuildReport, StepReport } from './reporter.ts';
import { isFinal, type Status } from './status.ts';
import { BuildOutputs } from './outputs/build-outputs.ts';

export type { ExecutorLogger, ExecutorOptions, LogOptions } from './options.ts';
export type { StreamRequest } from './build/log-streams.ts';

/**
 * Runs one build. Mirrors go-vela/worker's executor: call createBuild, planBuild, assembleBuild
 * and execBuild in that order with the exec ctx, streamBuild alongside with the stream ctx, and
 * destroyBuild last with the destroy ctx — or let {@link runBuild} do it.
 *
 * The init step is no container: it holds the build's setup log. Services run detached; steps in
 * order; stages as a DAG on `needs`. Each lifecycle method rejects with an {@link ExecutorError}
 * (or the ctx's error) when the build cannot go on; a step that fails is no error (the build's
 * status says it). The final build status is reported at the end of destroyBuild, or when
 * execBuild returns (as Vela does) with `finalBuildStatusAt: 'exec-end'`.
 *
 * Gotcha: one executor runs one build, once.
 */
export class Executor {
  readonly build: Build;
  readonly runtime: Runtime;
  readonly #core: BuildCore;
  #unregisterEvents: (() => void) | undefined;
  #execDone = false;
  /** streamStep, as the stream requests of steps carry it. */
  readonly #streamStep = (ctx: Context, container: Container): Promise<void> => this.streamStep(ctx, container);
  #destroyed = false;

  constructor(options: ExecutorOptions) {
    this.#core = new BuildCore(options);
    this.build = this.#core.build;
    this.runtime = this.#core.runtime;
  }

  // ---- contexts ---------------------------------------------------------------------------

  /**
   * Makes the build's contexts under `parent` (the worker's root ctx): build, exec (build
   * timeout), stream (log-streaming grace once the build ctx ends) and destroy (detached).
   * Cancelling the build (cancelBuild, or `parent`) ends exec at once and streams after the grace.
   */
  contexts(parent: Context): BuildContexts {
    const { contexts, state } = makeBuildContexts(parent, { timeoutMs: this.#core.timeoutMs, logStreamingGraceMs: this.#core.streamGraceMs });
    this.#core.contexts = state;
    this.#core.streams.useStreamCtx(contexts.stream);
    this.#core.reportCtx = withoutCancel(contexts.build);
    return contexts;
  }

  /**
   * Cancels the build: the build ctx is cancelled (exec stops at once, streams after their grace),
   * running steps end `canceled` with exit code 137, steps not reached end `canceled`, and the
   * build ends `canceled`. Containers are removed by destroyBuild. No effect once the build is over
   * (its final status recorded, or its contexts ended: exec returned) or destroying began.
   *
   * Gotcha: it cancels through the contexts made by {@link contexts} (runBuild makes them); an
   * executor driven with contexts of its own only records the cancel — cancel those yourself.
   */
  cancelBuild(cause?: unknown): void {
    if (this.#destroyed || isFinal(this.#core.record.status) || this.#core.contexts?.released === true) return;
    this.#core.record.cancel(cause);
    this.#core.contexts?.cancel(cause ?? new Error('build canceled'));
  }

  /** The build's status now. */
  get status(): Status {
    return this.#core.record.status;
  }

  /** The build's report now. */
  report(): BuildReport {
    return {
      id: this.build.id,
      ...this.#core.record.reportFields(),
      runtime: this.runtime.name,
      host: this.#core.host,
      distribution: 'linux',
    };
  }

  /** The reports of the init step, services and steps now, in pipeline order. */
  steps(): StepReport[] {
    return [this.#core.init.report(), ...[...this.#core.runs.values()].map((r) => r.report())];
  }

  // ---- build ------------------------------------------------------------------------------

  /**
   * Marks the build running, checks the stages' `needs` for cycles, sets the runtime build up and
   * starts the init step.
   */
  async createBuild(ctx: Context): Promise<void> {
    this.#core.enter(ctx);
    this.#core.record.start();
    this.#unregisterEvents = this.#core.options.events?.register(this.build.id, (event) => this.#onRuntimeEvent(event));
    await this.#reportBuild();
    await this.#phase(ctx, 'create', async () => {
      checkStages(this.build.stages);
      const refusal = this.#core.outputs.refusal(
        [...this.#core.runs.values()].filter((run) => run.kind === 'step').map((run) => run.container),
        knownNames,
      );
      if (refusal !== undefined) throw new ExecutorError('create', '', refusal);
      const services = BuildOutputs.serviceRefusal(this.build.services, knownNames);
      if (services !== undefined) throw new ExecutorError('create', '', services);
      const init = this.#core.init;
      init.status = 'running';
      init.started = Date.now();
      await this.#core.reportStep(init);
      await this.#core.initLine(
        `> Worker information:\n  host: ${this.#core.host}\n  version: ${this.#core.options.version ?? 'unknown'}\n  runtime: ${this.runtime.name}\n`,
      );
      await this.runtime.setupBuild(ctx, this.build);
    });
  }

  /** Creates the network and the volume and loads the secrets, writing what it did to the init log. */
  async planBuild(ctx: Context): Promise<void> {
    this.#core.enter(ctx);
    await this.#phase(ctx, 'plan', async () => {
      await this.runtime.createNetwork(ctx, this.build);
      await this.#core.initLine('> Inspecting runtime network...\n');
      await this.#core.initLine(await this.runtime.inspectNetwork(ctx, this.build));
      await this.runtime.createVolume(ctx, this.build);
      await this.#core.initLine('> Inspecting runtime volume...\n');
      await this.#core.initLine(await this.runtime.inspectVolume(ctx, this.build));
      if (this.#core.outputs.active) {
        await this.runtime.setupOutputs?.(ctx, this.build);
        await this.#core.initLine(`> Preparing outputs: ${OUTPUTS_DIR} is shared by the build's steps\n`);
      }
      await this.#core.initLine('> Preparing secrets...\n');
      for (const secret of this.build.secrets) {
        if (secret.origin !== null) {
          await this.#core.initLine(`> Skipping secret <${secret.name}>: secrets from plugin images (origin) are not supported by Berth\n`);
          continue;
        }
        if (secret.pull === 'step_start') {
          await this.#core.initLine(`> Skipping pull: secret <${secret.name}> lazy loaded\n`);
          continue;
        }
        await this.#core.secrets.load(ctx, secret);
        await this.#core.initLine(`> Loaded secret <${secret.name}> (engine ${secret.engine || 'native'}, type ${secret.type || 'repo'})\n`);
      }
    });
  }

  /**
   * Creates every service, stage and step (images inspected into the init log), then assembles
   * the runtime build. Ends the init step.
   */
  async assembleBuild(ctx: Context): Promise<void> {
    this.#core.enter(ctx);
    await this.#phase(ctx, 'assemble', async () => {
      await this.#core.initLine('> Preparing service images...\n');
      for (const service of this.build.services) {
        await this.#core.initLine(`> Preparing service image ${service.image}...\n`);
        await this.createService(ctx, service);
        await this.#core.initLine(await this.runtime.inspectImage(ctx, service));
      }
      await this.#core.initLine('> Preparing stage images...\n');
      for (const stage of this.build.stages) {
        if (stage.name === INIT_NAME) continue;
        await this.createStage(ctx, stage);
      }
      await this.#core.initLine('> Preparing step images...\n');
      await createSteps(this.#core, ctx, this.#steps());
      const described = await this.runtime.inspectBuild(ctx, this.build);
      if (described.length > 0) {
        await this.#core.initLine('> Inspecting runtime build...\n');
        await this.#core.initLine(described);
      }
      await this.runtime.assembleBuild(ctx, this.build);
      // The steps' containers are set up from now on, one at a time, where the runtime allows it.
      setUpAhead(this.#core, ctx, this.#steps());
      for (const stage of this.build.stages) if (stage.name !== INIT_NAME) setUpAhead(this.#core, ctx, stage.steps);
    });
    const init = this.#core.init;
    init.status = 'success';
    init.finished = Date.now();
    // Not awaited: the init log reaches the reporter while the build goes on; destroyBuild waits for it.
    void this.#core.closeInit();
    await this.#core.reportStep(init);
  }

  /**
   * Runs the services (detached), then the steps in order, then the stages as a DAG. Closes the
   * stream-request channel when it returns, and with `finalBuildStatusAt: 'exec-end'` records and
   * reports the build's final status. Rejects when the build cannot go on (a container could not
   * run, the build timed out or was cancelled).
   */
  async execBuild(ctx: Context): Promise<void> {
    this.#core.enter(ctx);
    try {
      await this.#phase(ctx, 'exec', async () => {
        for (const service of this.build.services) {
          await this.planService(ctx, service);
          await this.execService(ctx, service);
        }
        for (const step of this.#steps()) await runStep(this.#core, ctx, step, () => this.#core.record.ruleStatus, this.#streamStep);
        const stages = this.build.stages.filter((s) => s.name !== INIT_NAME);
        if (stages.length > 0) {
          for (const stage of stages) this.#core.stageDone.set(stage.name, deferred());
          const group = new TaskGroup(ctx);
          for (const stage of stages) {
            group.go(async (stageCtx) => {
              const done = this.#core.stageDone.get(stage.name) as Deferred;
              try {
                await this.planStage(stageCtx, stage);
                await this.execStage(stageCtx, stage);
                done.resolve();
              } catch (error) {
                done.reject(error);
                throw error;
              }
            });
          }
          await group.wait();
        }
      });
    } finally {
      this.#execDone = true;
      this.#core.stopAhead();
      this.#core.streams.close();
      // Vela: executor/linux/build.go ExecBuild defers close(c.streamRequests), then build.Upload.
      if (this.#core.options.finalBuildStatusAt === 'exec-end') await this.#finish();
    }
  }

  /**
   * Serves stream requests until execBuild returns (the channel closes) or `ctx` ends, running each
   * stream in a task group; resolves once every stream ended. Never rejects.
   *
   * A stream ends when its container ended and every byte was delivered, or when `ctx` ends (then
   * the log is closed with what arrived). Streams of services end when destroyBuild removes them.
   */
  streamBuild(ctx: Context): Promise<void> {
    return this.#core.streams.serve(ctx);
  }

  /**
   * Waits until the log streams of containers that have ended are complete, or `ctx` ends.
   * runBuild calls it between execBuild and destroyBuild so that the destroy ctx's limit does not
   * include streaming.
   */
  waitForStreams(ctx: Context): Promise<void> {
    return this.#core.streams.waitForEnded(ctx);
  }

  /**
   * Removes every container (services and running steps are stopped first; ended steps after
   * their log was read), the volume, the network and the runtime build; reports the final status
   * of every step and of the build (unless execBuild reported it: `finalBuildStatusAt`). Never
   * rejects: what it cannot remove is logged (and left to the runtime's reap).
   */
  async destroyBuild(ctx: Context): Promise<void> {
    if (this.#destroyed) return;
    this.#destroyed = true;
    this.#core.stopAhead();
    this.#core.log.debug?.(`destroy build ${this.build.id}`);
    try {
      if (!this.#execDone) this.#core.streams.close();
      const runs = [...this.#core.runs.values()];
      await Promise.all(runs.map((run) => this.#core.destroyContainer(ctx, run)));
      // Each removal in its own budget: a slow one never starves the next.
      await removeBuildResources(ctx, this.build, this.#core.destroyOptions());
      if (!isFinal(this.#core.init.status)) {
        this.#core.init.status = initFailureStatus(this.#core.record.canceled);
        this.#core.init.finished = Date.now();
        this.#core.init.error ??= this.#core.record.error;
        await this.#core.reportStep(this.#core.init);
      }
      await this.#core.closeInit();
    } finally {
      this.#unregisterEvents?.();
      this.#unregisterEvents = undefined;
      await this.#finish();
    }
  }

  // ---- services ---------------------------------------------------------------------------

  /** Sets the service's container up (pull as its policy says). */
  async createService(ctx: Context, container: Container): Promise<void> {
    const run = this.#core.run(container);
    this.#core.prepareEnvironment(run);
    container.detach = true;
    run.setupAsked = true;
    await this.#core.containerCall(run, 'assemble', () => this.runtime.setupContainer(ctx, container, this.build), ctx);
    run.setup = 'created';
  }

  /** Marks the service running. */
  async planService(_ctx: Context, container: Container): Promise<void> {
    const run = this.#core.run(container);
    run.status = 'running';
    run.started = Date.now();
    await this.#core.reportStep(run);
  }

  /** Starts the service (detached) and asks for its log to be streamed. */
  async execService(ctx: Context, container: Container): Promise<void> {
    const run = this.#core.run(container);
    await this.#core.containerCall(run, 'exec', () => this.runtime.runContainer(ctx, container, this.build), ctx);
    run.ran = true;
    await this.#requestStream(run);
  }

  /** Streams the service's log until its container ends or `ctx` does. */
  streamService(ctx: Context, container: Container): Promise<void> {
    return this.#core.streams.stream(ctx, this.#core.run(container));
  }

  /** Stops and removes the service's container and reports its final status. */
  destroyService(ctx: Context, container: Container): Promise<void> {
    return this.#core.destroyContainer(ctx, this.#core.run(container));
  }

  // ---- steps ------------------------------------------------------------------------------

  /** Prepares the step's environment (script, secrets) and sets its container up. */
  createStep(ctx: Context, container: Container): Promise<void> {
    return createStep(this.#core, ctx, container);
  }

  /** Loads the step's lazy secrets and marks it running. */
  planStep(ctx: Context, container: Container): Promise<void> {
    return planStep(this.#core, ctx, container);
  }

  /**
   * Runs the step's container and, unless it is detached, waits for it to end; its exit code
   * makes its status. Rejects when it could not run or `ctx` ended.
   */
  execStep(ctx: Context, container: Container): Promise<void> {
    return execStep(this.#core, ctx, container, this.#streamStep);
  }

  /** Streams the step's log until its container ended and every byte was delivered, or `ctx` ends. */
  streamStep(ctx: Context, container: Container): Promise<void> {
    return this.#core.streams.stream(ctx, this.#core.run(container));
  }

  /** Removes the step's container (after its log was read when it has ended) and reports its final status. */
  destroyStep(ctx: Context, container: Container): Promise<void> {
    return this.#core.destroyContainer(ctx, this.#core.run(container));
  }

  // ---- stages -----------------------------------------------------------------------------

  /** Creates every step of the stage. */
  createStage(ctx: Context, stage: Stage): Promise<void> {
    return createStage(this.#core, ctx, stage);
  }

  /**
   * Waits for the stages this one `needs` (names of stages not in the build are ignored, as
   * Vela does). Rejects when one of them could not complete (an error, not a failed step) or `ctx` ends.
   */
  planStage(ctx: Context, stage: Stage): Promise<void> {
    return planStage(this.#core, ctx, stage);
  }

  /**
   * Runs the stage's steps in order. Rulesets see the build's status, or — for an `independent`
   * stage — the stage's own, so a failure elsewhere does not skip its steps.
   */
  execStage(ctx: Context, stage: Stage): Promise<void> {
    return execStage(this.#core, ctx, stage, this.#streamStep);
  }

  /** Removes the stage's step containers. */
  async destroyStage(ctx: Context, stage: Stage): Promise<void> {
    await Promise.all(stage.steps.map((step) => this.destroyStep(ctx, step)));
  }

  // ---- internals --------------------------------------------------------------------------

  /** Runs a lifecycle phase: a failure errors the init step (before exec) and the build. */
  async #phase(ctx: Context, phase: Phase, body: () => Promise<void>): Promise<void> {
    this.#core.log.debug?.(`${phase} build ${this.build.id}`);
    if (ctx.signal.aborted) {
      this.#recordFailure(ctx, phase, errOf(ctx));
      await this.#failInit();
      throw errOf(ctx);
    }
    try {
      await body();
    } catch (error) {
      this.#recordFailure(ctx, phase, error);
      await this.#failInit();
      throw error;
    }
  }

  #recordFailure(ctx: Context, phase: Phase, error: unknown): void {
    if (ctx.signal.aborted) {
      const why = this.#core.interruption(ctx);
      if (why === 'timeout') this.#core.record.errored(timeoutMessage(this.#core.timeoutMs));
      // A cancelled build says so in its final status; anything else is the error that stopped it.
      else if (why === 'stopped') this.#core.record.errored(this.#core.mask(messageOf(error)));
      return;
    }
    this.#core.record.errored(this.#core.mask(error instanceof ExecutorError ? error.message : this.#core.executorError(phase, '', error).message));
  }

  async #failInit(): Promise<void> {
    const init = this.#core.init;
    if (isFinal(init.status)) return;
    const error = this.#core.record.error;
    init.status = initFailureStatus(this.#core.record.canceled);
    init.finished = Date.now();
    init.started ??= init.finished;
    init.error = error;
    if (error !== undefined) await this.#core.initLine(`> ${error}\n`);
    await this.#core.closeInit();
    await this.#core.reportStep(init);
  }

  /** The build's steps (not its stages'), without the init step. */
  #steps(): Container[] {
    return this.build.steps.filter((step) => step !== this.#core.init.container);
  }

  #requestStream(run: ContainerRun): Promise<void> {
    return this.#core.requestStream(run, run.kind === 'service' ? this.streamService.bind(this) : this.streamStep.bind(this));
  }

  #onRuntimeEvent(event: RuntimeEvent): void {
    if (this.#core.reporter.runtimeEvent === undefined) return;
    const run = this.#core.runs.get(event.containerId);
    if (run === undefined) return;
    const masked = event.type === 'notice' ? { ...event, message: this.#core.mask(event.message) } : event;
    this.#core.reporter.runtimeEvent(this.#core.reportCtx, run.target, masked);
  }

  /** The build is over: its final status is recorded and reported, once. */
  /** Records the build's final status and reports it, once: the record's status is final only after. */
  async #finish(): Promise<void> {
    if (isFinal(this.#core.record.status)) return;
    this.#core.record.finish();
    await this.#reportBuild();
  }

  async #reportBuild(): Promise<void> {
    try {
      await this.#core.reporter.buildStatus(this.#core.reportCtx, this.report());
    } catch (error) {
      this.#core.log.warn?.(`reporter buildStatus: ${messageOf(error)}`);
    }
  }
}
