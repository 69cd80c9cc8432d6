/**
 * The executor: runs one compiled pipeline on a Runtime, as go-vela/worker's `executor/linux`
 * does — create, plan, assemble, exec, stream, destroy — and reports status and logs.
 */
import { hostname } from 'node:os';
import { background, type Context, DeadlineExceeded, errOf, isContextError, TaskGroup, withoutCancel } from '@berth/context';
import { type Build, type Container, emptyContainer, type RuleData, RulesetError, type Stage, shouldExecute } from '@berth/pipeline';
import type { Runtime, RuntimeEvent } from '@berth/runtime';
import { type BuildContexts, type BuildContextState, type Deferred, deferred, makeBuildContexts, untilDone } from './build/contexts.ts';
import { type DestroyOptions, removeBuildResources, removeContainerOf } from './build/destroy.ts';
import { BuildSecrets } from './build/build-secrets.ts';
import { prepareEnvironment, type WorkerVariables } from './build/environment.ts';
import { checkStages, describeRuntimeError, knownNames } from './build/checks.ts';
import { ContainerRun, copyBuild } from './build/container-run.ts';
import { LogStreams } from './build/log-streams.ts';
import {
  BuildRecord,
  initFailureStatus,
  type Interruption,
  interruptedOutcome,
  interruptionOf,
  type Outcome,
  timeoutMessage,
  unfinishedOutcome,
} from './build/state.ts';
import { ExecutorError, messageOf, type Phase } from './errors.ts';
import type { RuntimeEventRouter } from './events.ts';
import type { BatchOptions } from './log/batcher.ts';
import type { LogLimits } from './log/cap.ts';
import { BuildOutputs } from './outputs/build-outputs.ts';
import { missingImageNames, OUTPUTS_DIR } from './outputs/outputs.ts';
import { type BuildReport, nullReporter, type Reporter, type StepReport } from './reporter.ts';
import { injectSecrets, type LoadedSecret, type SecretLoader, type SecretSet } from './secrets.ts';
import { isFinal, type Status, statusOfExit } from './status.ts';

/** Where the executor writes what it does, for the worker's own log. All optional. */
export interface ExecutorLogger {
  debug?(message: string): void;
  info?(message: string): void;
  warn?(message: string): void;
}

/** Settings of the log path. */
export interface LogOptions extends BatchOptions {
  /** The per-container size cap (16 MiB, the last 1 MiB kept as tail, by default). */
  limits?: LogLimits;
}

/** Settings of {@link Executor}. */
export interface ExecutorOptions {
  /** The compiled pipeline, with ids set (`prepareBuild`). The executor works on a copy. */
  build: Build;
  /** The runtime the containers run on. */
  runtime: Runtime;
  /** Where status and logs go. Default: nowhere. */
  reporter?: Reporter;
  /** The build timeout: create, plan, assemble and exec must end within it. Default 30 min. */
  timeoutMs?: number;
  /**
   * How long log streams go on once the build was cancelled, so the last lines still arrive
   * (Vela's log-streaming timeout). Default 60 s.
   */
  logStreamingGraceMs?: number;
  /**
   * The budget of each step of destroyBuild, whatever happened before: removing the containers
   * (each in its own budget, in parallel), waiting for a container's log stream, removing the
   * volume, the network and the runtime build. Its runtime calls end within 6 budgets (inspect,
   * remove and stream wait of the containers, then volume, network, build). Default 2 min.
   */
  cleanupTimeoutMs?: number;
  /**
   * What rulesets are matched against (branch, event, repo, tag, target…); the status comes from
   * the build as it runs.
   */
  ruleData?: Omit<RuleData, 'status' | 'env'>;
  /** Loads the value of each secret of the build; default: the secret's `value` as given. */
  loadSecret?: SecretLoader;
  /**
   * Variables laid over each container's environment before its secrets, as Vela's worker lays
   * the build's and the repo's variables (`VELA_BUILD_*`, `VELA_REPO_*`) as they are when the
   * build runs. Called once per container.
   */
  environment?: (container: Container) => Readonly<Record<string, string>>;
  /** The log path's settings. */
  logs?: LogOptions;
  /** Routes the runtime's pull progress and notices to this build's reporter. */
  events?: RuntimeEventRouter;
  /** The worker's host name, for the init log and `VELA_HOST`. Default `os.hostname()`. */
  host?: string;
  /** The worker's version, for the init log and `VELA_VERSION`. */
  version?: string;
  /**
   * Vela's outputs (on in Vela when `VELA_EXECUTOR_OUTPUTS_IMAGE` is set): what a step writes to
   * `/vela/outputs/*.env` becomes environment (and `${KEY}` in the image) of the steps after it.
   * Needs a runtime with the `outputs` capability; without one, a build whose images need outputs
   * is refused at its start. Default false.
   */
  outputs?: boolean;
  logger?: ExecutorLogger;
}

export type { StreamRequest } from './build/log-streams.ts';

const INIT_NAME = 'init';
const INIT_IMAGE = '#init';

/**
 * Runs one build. Mirrors go-vela/worker's executor: call createBuild, planBuild, assembleBuild
 * and execBuild in that order with the exec ctx, streamBuild alongside with the stream ctx, and
 * destroyBuild last with the destroy ctx — or let {@link runBuild} do it.
 *
 * The init step is no container: it holds the build's setup log. Services run detached; steps in
 * order; stages as a DAG on `needs`. Each lifecycle method rejects with an {@link ExecutorError}
 * (or the ctx's error) when the build cannot go on; a step that fails is no error (the build's
 * status says it). The final build status is reported at the end of destroyBuild.
 *
 * Gotcha: one executor runs one build, once.
 */
export class Executor {
  readonly build: Build;
  readonly runtime: Runtime;
  readonly #reporter: Reporter;
  readonly #options: ExecutorOptions;
  readonly #timeoutMs: number;
  readonly #streamGraceMs: number;
  readonly #host: string;
  readonly #log: ExecutorLogger;
  readonly #streams: LogStreams<ContainerRun>;
  readonly #runs = new Map<string, ContainerRun>();
  readonly #init: ContainerRun;
  readonly #stageDone = new Map<string, Deferred>();
  /** Secrets loaded so far (by secret name). */
  readonly #secrets: BuildSecrets;
  readonly #outputs: BuildOutputs;

  readonly #record = new BuildRecord();
  #reportCtx: Context = background();
  #execCtx: Context | undefined;
  #contexts: BuildContextState | undefined;
  #unregisterEvents: (() => void) | undefined;
  #execDone = false;
  #destroyed = false;

  constructor(options: ExecutorOptions) {
    this.#options = options;
    this.build = copyBuild(options.build);
    this.runtime = options.runtime;
    this.#reporter = options.reporter ?? nullReporter;
    this.#timeoutMs = options.timeoutMs ?? 30 * 60_000;
    this.#streamGraceMs = options.logStreamingGraceMs ?? 60_000;
    this.#host = options.host ?? hostname();
    this.#log = maskedLogger(options.logger ?? {}, (text) => this.#mask(text));
    this.#outputs = new BuildOutputs(this.runtime, options.outputs === true);
    this.#secrets = new BuildSecrets({
      loader: options.loadSecret,
      maskedOutputs: () => this.#outputs.maskedValues(),
      onLoaded: (value) => {
        this.#init.writer?.addSecrets(value);
        for (const run of this.#runs.values()) run.writer?.addSecrets(value);
      },
    });

    const initStep = this.build.steps.find((s) => s.name === INIT_NAME) ?? this.build.stages.find((s) => s.name === INIT_NAME)?.steps[0];
    this.#init = new ContainerRun('init', initStep ?? emptyContainer({ id: `${this.build.id}_init`, name: INIT_NAME, image: INIT_IMAGE }));
    for (const service of this.build.services) this.#runs.set(service.id, new ContainerRun('service', service));
    for (const step of this.build.steps) if (step !== initStep) this.#runs.set(step.id, new ContainerRun('step', step));
    for (const stage of this.build.stages) {
      if (stage.name === INIT_NAME) continue;
      for (const step of stage.steps) this.#runs.set(step.id, new ContainerRun('step', step, stage.name));
    }
    this.#streams = new LogStreams<ContainerRun>({
      runtime: this.runtime,
      reporter: this.#reporter,
      init: this.#init,
      runs: this.#runs,
      reportCtx: () => this.#reportCtx,
      logger: this.#log,
      logs: options.logs ?? {},
      streamGraceMs: this.#streamGraceMs,
      secretsFor: (run) => this.#secrets.valuesFor(run.container),
    });
  }

  // ---- contexts ---------------------------------------------------------------------------

  /**
   * Makes the build's contexts under `parent` (the worker's root ctx): build, exec (build
   * timeout), stream (log-streaming grace once the build ctx ends) and destroy (detached).
   * Cancelling the build (cancelBuild, or `parent`) ends exec at once and streams after the grace.
   */
  contexts(parent: Context): BuildContexts {
    const { contexts, state } = makeBuildContexts(parent, { timeoutMs: this.#timeoutMs, logStreamingGraceMs: this.#streamGraceMs });
    this.#contexts = state;
    this.#streams.useStreamCtx(contexts.stream);
    this.#reportCtx = withoutCancel(contexts.build);
    return contexts;
  }

  /**
   * Cancels the build: the build ctx is cancelled (exec stops at once, streams after their grace),
   * running steps end `canceled` with exit code 137, steps not reached end `canceled`, and the
   * build ends `canceled`. Containers are removed by destroyBuild. No effect once the build is over
   * (its contexts ended: exec returned) or destroying began.
   *
   * Gotcha: it cancels through the contexts made by {@link contexts} (runBuild makes them); an
   * executor driven with contexts of its own only records the cancel — cancel those yourself.
   */
  cancelBuild(cause?: unknown): void {
    if (this.#destroyed || isFinal(this.#record.status) || this.#contexts?.released === true) return;
    this.#record.cancel(cause);
    this.#contexts?.cancel(cause ?? new Error('build canceled'));
  }

  /** The build's status now. */
  get status(): Status {
    return this.#record.status;
  }

  /** The build's report now. */
  report(): BuildReport {
    return {
      id: this.build.id,
      ...this.#record.reportFields(),
      runtime: this.runtime.name,
      host: this.#host,
      distribution: 'linux',
    };
  }

  /** The reports of the init step, services and steps now, in pipeline order. */
  steps(): StepReport[] {
    return [this.#init.report(), ...[...this.#runs.values()].map((r) => r.report())];
  }

  // ---- build ------------------------------------------------------------------------------

  /**
   * Marks the build running, checks the stages' `needs` for cycles, sets the runtime build up and
   * starts the init step.
   */
  async createBuild(ctx: Context): Promise<void> {
    this.#enter(ctx);
    this.#record.start();
    this.#unregisterEvents = this.#options.events?.register(this.build.id, (event) => this.#onRuntimeEvent(event));
    await this.#reportBuild();
    await this.#phase(ctx, 'create', async () => {
      checkStages(this.build.stages);
      const refusal = this.#outputs.refusal(
        [...this.#runs.values()].filter((run) => run.kind === 'step').map((run) => run.container),
        knownNames,
      );
      if (refusal !== undefined) throw new ExecutorError('create', '', refusal);
      const services = BuildOutputs.serviceRefusal(this.build.services, knownNames);
      if (services !== undefined) throw new ExecutorError('create', '', services);
      const init = this.#init;
      init.status = 'running';
      init.started = Date.now();
      await this.#reportStep(init);
      await this.#initLine(`> Worker information:\n  host: ${this.#host}\n  version: ${this.#options.version ?? 'unknown'}\n  runtime: ${this.runtime.name}\n`);
      await this.runtime.setupBuild(ctx, this.build);
    });
  }

  /** Creates the network and the volume and loads the secrets, writing what it did to the init log. */
  async planBuild(ctx: Context): Promise<void> {
    this.#enter(ctx);
    await this.#phase(ctx, 'plan', async () => {
      await this.runtime.createNetwork(ctx, this.build);
      await this.#initLine('> Inspecting runtime network...\n');
      await this.#initLine(await this.runtime.inspectNetwork(ctx, this.build));
      await this.runtime.createVolume(ctx, this.build);
      await this.#initLine('> Inspecting runtime volume...\n');
      await this.#initLine(await this.runtime.inspectVolume(ctx, this.build));
      if (this.#outputs.active) {
        await this.runtime.setupOutputs?.(ctx, this.build);
        await this.#initLine(`> Preparing outputs: ${OUTPUTS_DIR} is shared by the build's steps\n`);
      }
      await this.#initLine('> Preparing secrets...\n');
      for (const secret of this.build.secrets) {
        if (secret.origin !== null) {
          await this.#initLine(`> Skipping secret <${secret.name}>: secrets from plugin images (origin) are not supported by Berth\n`);
          continue;
        }
        if (secret.pull === 'step_start') {
          await this.#initLine(`> Skipping pull: secret <${secret.name}> lazy loaded\n`);
          continue;
        }
        await this.#secrets.load(ctx, secret);
        await this.#initLine(`> Loaded secret <${secret.name}> (engine ${secret.engine || 'native'}, type ${secret.type || 'repo'})\n`);
      }
    });
  }

  /**
   * Creates every service, stage and step (images inspected into the init log), then assembles
   * the runtime build. Ends the init step.
   */
  async assembleBuild(ctx: Context): Promise<void> {
    this.#enter(ctx);
    await this.#phase(ctx, 'assemble', async () => {
      await this.#initLine('> Preparing service images...\n');
      for (const service of this.build.services) {
        await this.#initLine(`> Preparing service image ${service.image}...\n`);
        await this.createService(ctx, service);
        await this.#initLine(await this.runtime.inspectImage(ctx, service));
      }
      await this.#initLine('> Preparing stage images...\n');
      for (const stage of this.build.stages) {
        if (stage.name === INIT_NAME) continue;
        await this.createStage(ctx, stage);
      }
      await this.#initLine('> Preparing step images...\n');
      for (const step of this.build.steps) {
        if (step === this.#init.container) continue;
        await this.#initLine(`> Preparing step image ${step.image}...\n`);
        await this.createStep(ctx, step);
        await this.#initLine(await this.#inspectStepImage(ctx, step));
      }
      const described = await this.runtime.inspectBuild(ctx, this.build);
      if (described.length > 0) {
        await this.#initLine('> Inspecting runtime build...\n');
        await this.#initLine(described);
      }
      await this.runtime.assembleBuild(ctx, this.build);
    });
    const init = this.#init;
    init.status = 'success';
    init.finished = Date.now();
    // Not awaited: the init log reaches the reporter while the build goes on; destroyBuild waits for it.
    void this.#closeInit();
    await this.#reportStep(init);
  }

  /**
   * Runs the services (detached), then the steps in order, then the stages as a DAG. Closes the
   * stream-request channel when it returns. Rejects when the build cannot go on (a container could
   * not run, the build timed out or was cancelled).
   */
  async execBuild(ctx: Context): Promise<void> {
    this.#enter(ctx);
    try {
      await this.#phase(ctx, 'exec', async () => {
        for (const service of this.build.services) {
          await this.planService(ctx, service);
          await this.execService(ctx, service);
        }
        for (const step of this.build.steps) {
          if (step === this.#init.container) continue;
          await this.#runStep(ctx, step, () => this.#record.ruleStatus);
        }
        const stages = this.build.stages.filter((s) => s.name !== INIT_NAME);
        if (stages.length > 0) {
          for (const stage of stages) this.#stageDone.set(stage.name, deferred());
          const group = new TaskGroup(ctx);
          for (const stage of stages) {
            group.go(async (stageCtx) => {
              const done = this.#stageDone.get(stage.name) as Deferred;
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
      this.#streams.close();
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
    return this.#streams.serve(ctx);
  }

  /**
   * Waits until the log streams of containers that have ended are complete, or `ctx` ends.
   * runBuild calls it between execBuild and destroyBuild so that the destroy ctx's limit does not
   * include streaming.
   */
  waitForStreams(ctx: Context): Promise<void> {
    return this.#streams.waitForEnded(ctx);
  }

  /**
   * Removes every container (services and running steps are stopped first; ended steps after
   * their log was read), the volume, the network and the runtime build; reports the final status
   * of every step and of the build. Never rejects: what it cannot remove is logged (and left to
   * the runtime's reap).
   */
  async destroyBuild(ctx: Context): Promise<void> {
    if (this.#destroyed) return;
    this.#destroyed = true;
    this.#log.debug?.(`destroy build ${this.build.id}`);
    try {
      if (!this.#execDone) this.#streams.close();
      const runs = [...this.#runs.values()];
      await Promise.all(runs.map((run) => this.#destroyContainer(ctx, run)));
      // Each removal in its own budget: a slow one never starves the next.
      await removeBuildResources(ctx, this.build, this.#destroyOptions());
      if (!isFinal(this.#init.status)) {
        this.#init.status = initFailureStatus(this.#record.canceled);
        this.#init.finished = Date.now();
        this.#init.error ??= this.#record.error;
        await this.#reportStep(this.#init);
      }
      await this.#closeInit();
    } finally {
      this.#unregisterEvents?.();
      this.#unregisterEvents = undefined;
      this.#record.finish();
      await this.#reportBuild();
    }
  }

  // ---- services ---------------------------------------------------------------------------

  /** Sets the service's container up (pull as its policy says). */
  async createService(ctx: Context, container: Container): Promise<void> {
    const run = this.#run(container);
    this.#prepareEnvironment(run);
    container.detach = true;
    await this.#containerCall(run, 'assemble', () => this.runtime.setupContainer(ctx, container, this.build), ctx);
    run.created = true;
  }

  /** Marks the service running. */
  async planService(_ctx: Context, container: Container): Promise<void> {
    const run = this.#run(container);
    run.status = 'running';
    run.started = Date.now();
    await this.#reportStep(run);
  }

  /** Starts the service (detached) and asks for its log to be streamed. */
  async execService(ctx: Context, container: Container): Promise<void> {
    const run = this.#run(container);
    await this.#containerCall(run, 'exec', () => this.runtime.runContainer(ctx, container, this.build), ctx);
    run.ran = true;
    await this.#requestStream(run);
  }

  /** Streams the service's log until its container ends or `ctx` does. */
  streamService(ctx: Context, container: Container): Promise<void> {
    return this.#streams.stream(ctx, this.#run(container));
  }

  /** Stops and removes the service's container and reports its final status. */
  destroyService(ctx: Context, container: Container): Promise<void> {
    return this.#destroyContainer(ctx, this.#run(container));
  }

  // ---- steps ------------------------------------------------------------------------------

  /** Prepares the step's environment (script, secrets) and sets its container up. */
  async createStep(ctx: Context, container: Container): Promise<void> {
    const run = this.#run(container);
    if (run.kind === 'init') return;
    if (this.#outputs.active) run.template = structuredClone(container);
    this.#prepareEnvironment(run);
    if (run.template !== undefined && missingImageNames(run.template.image, container.environment).length > 0) {
      // Its image needs an output: set up when it starts (Vela creates every container then).
      run.deferred = true;
      Object.assign(container, structuredClone(run.template));
      return;
    }
    await this.#containerCall(run, 'assemble', () => this.runtime.setupContainer(ctx, container, this.build), ctx);
    run.created = true;
  }

  /** Loads the step's lazy secrets and marks it running. */
  async planStep(ctx: Context, container: Container): Promise<void> {
    const run = this.#run(container);
    if (run.kind === 'init') return;
    // The step's lazy secrets (loaded once, by the first step that needs them), and any not loaded yet.
    const late = new Map<string, LoadedSecret>();
    for (const ref of container.secrets) {
      const secret = this.build.secrets.find((s) => s.name === ref.source);
      if (secret === undefined || secret.origin !== null) continue;
      if (secret.pull !== 'step_start' && this.#secrets.loaded.has(secret.name)) continue;
      if (!this.#secrets.loaded.has(secret.name)) await this.#containerCall(run, 'exec', () => this.#secrets.load(ctx, secret), ctx);
      const loaded = this.#secrets.loaded.get(secret.name);
      if (loaded !== undefined) late.set(secret.name, loaded);
    }
    // They arrive after substitution: they only reach the environment.
    if (late.size > 0) this.#injectSecrets(run, 'all', late);
    run.status = 'running';
    run.started = Date.now();
    await this.#reportStep(run);
  }

  /**
   * Runs the step's container and, unless it is detached, waits for it to end; its exit code
   * makes its status. Rejects when it could not run or `ctx` ended.
   */
  async execStep(ctx: Context, container: Container): Promise<void> {
    const run = this.#run(container);
    if (run.kind === 'init') return;
    await this.#containerCall(run, 'exec', () => this.runtime.runContainer(ctx, container, this.build), ctx);
    run.ran = true;
    await this.#requestStream(run);
    if (container.detach) return;
    this.#log.debug?.(`waiting for step ${container.name}`);
    const exit = await this.#containerCall(run, 'exec', () => this.runtime.waitContainer(ctx, container), ctx, 1);
    this.#log.debug?.(`step ${container.name} exited with ${exit.exitCode}`);
    run.exited = true;
    run.exitCode = exit.exitCode;
    container.exit_code = exit.exitCode;
    run.status = statusOfExit(exit.exitCode);
    run.finished = Date.now();
    if (run.status === 'failure') {
      const reason = exit.reason !== undefined && !['', 'Error', 'Completed'].includes(exit.reason) ? ` (${exit.reason})` : '';
      run.error = `exited with code ${exit.exitCode}${reason}`;
      if (!container.ruleset.continue) this.#record.stepFailed();
    }
    await this.#reportStep(run);
  }

  /** Streams the step's log until its container ended and every byte was delivered, or `ctx` ends. */
  streamStep(ctx: Context, container: Container): Promise<void> {
    return this.#streams.stream(ctx, this.#run(container));
  }

  /** Removes the step's container (after its log was read when it has ended) and reports its final status. */
  destroyStep(ctx: Context, container: Container): Promise<void> {
    return this.#destroyContainer(ctx, this.#run(container));
  }

  // ---- stages -----------------------------------------------------------------------------

  /** Creates every step of the stage. */
  async createStage(ctx: Context, stage: Stage): Promise<void> {
    await this.#initLine(`> Preparing step images for stage ${stage.name}...\n`);
    for (const step of stage.steps) {
      step.environment['VELA_STEP_STAGE'] = stage.name;
      await this.#initLine(`> Preparing step image ${step.image}...\n`);
      await this.createStep(ctx, step);
      await this.#initLine(await this.#inspectStepImage(ctx, step));
    }
  }

  /**
   * Waits for the stages this one `needs` (names of stages not in the build are ignored, as
   * Vela does). Rejects when one of them could not complete (an error, not a failed step) or `ctx` ends.
   */
  async planStage(ctx: Context, stage: Stage): Promise<void> {
    for (const need of stage.needs) {
      const done = this.#stageDone.get(need);
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
  async execStage(ctx: Context, stage: Stage): Promise<void> {
    let stageFailed = false;
    for (const step of stage.steps) {
      const run = this.#run(step);
      await this.#runStep(ctx, step, () => (stage.independent ? (stageFailed ? 'failure' : 'running') : this.#record.ruleStatus));
      if (run.status === 'failure' && !step.ruleset.continue) stageFailed = true;
    }
  }

  /** Removes the stage's step containers. */
  async destroyStage(ctx: Context, stage: Stage): Promise<void> {
    await Promise.all(stage.steps.map((step) => this.destroyStep(ctx, step)));
  }

  // ---- internals --------------------------------------------------------------------------

  #enter(ctx: Context): void {
    this.#execCtx = ctx;
    if (this.#contexts === undefined) this.#reportCtx = withoutCancel(ctx);
  }

  #run(container: Container): ContainerRun {
    if (container === this.#init.container || container.id === this.#init.container.id) return this.#init;
    const run = this.#runs.get(container.id);
    if (run === undefined) throw new ExecutorError('exec', `container "${container.name}"`, `${container.id} is not part of build ${this.build.id}`);
    return run;
  }

  async #runStep(ctx: Context, step: Container, status: () => string): Promise<void> {
    if (ctx.signal.aborted) throw errOf(ctx);
    const run = this.#run(step);
    let execute: boolean;
    try {
      execute = shouldExecute(step, { ...this.#options.ruleData, status: status() });
    } catch (error) {
      const detail = error instanceof RulesetError ? `cannot evaluate its ruleset: ${error.message}` : messageOf(error);
      run.status = 'error';
      run.error = detail;
      run.finished = Date.now();
      await this.#reportStep(run);
      throw new ExecutorError('exec', `step "${step.name}"`, detail, { cause: error });
    }
    if (!execute) {
      run.status = 'skipped';
      await this.#reportStep(run);
      return;
    }
    if (run.template !== undefined && (run.deferred || this.#outputs.any)) await this.#setupWithOutputs(ctx, run, run.template);
    await this.planStep(ctx, step);
    await this.execStep(ctx, step);
    if (this.#outputs.active && run.exited) await this.#pollOutputs(ctx, run);
  }

  /**
   * Prepares the step again from its compiled form with the outputs so far and sets its container
   * up (again): go-vela/worker executor/linux/build.go ExecBuild lays the outputs on the step
   * (outputs.Process) and substitutes it just before PlanStep and ExecStep. An image `${KEY}` no
   * output gave fails the step and the build, naming the step, the image and the key.
   */
  async #setupWithOutputs(ctx: Context, run: ContainerRun, template: Container): Promise<void> {
    const fresh = structuredClone(template);
    run.notes.length = 0;
    this.#note(run, prepareEnvironment(fresh, 'step', this.#workerVariables(), this.#secrets.loaded, this.#outputs.current));
    const missing = missingImageNames(template.image, fresh.environment);
    if (missing.length > 0) {
      const names = missing.map((name) => `\${${name}}`).join(', ');
      const detail = `image "${template.image}" needs ${names}, which no step before it wrote to ${OUTPUTS_DIR} (.env, masked.env, base64.env or masked.base64.env): write it there in an earlier step, or set it in the step's environment`;
      run.status = 'error';
      run.error = this.#mask(detail);
      run.finished = Date.now();
      run.started ??= run.finished;
      await this.#reportStep(run);
      throw new ExecutorError('exec', `step "${run.container.name}"`, run.error);
    }
    const container = run.container;
    if (run.created) {
      await this.#containerCall(run, 'exec', () => this.runtime.removeContainer(ctx, container), ctx);
      run.created = false;
    }
    Object.assign(container, fresh);
    await this.#containerCall(run, 'exec', () => this.runtime.setupContainer(ctx, container, this.build), ctx);
    run.created = true;
    run.deferred = false;
  }

  /**
   * Reads the outputs through the step that just ended (Vela polls before each next step, which
   * reads the same files) and masks their masked values from now on. A file that cannot be read
   * errors the build, as Vela's poll error does; content that cannot be used is warned about.
   */
  async #pollOutputs(ctx: Context, run: ContainerRun): Promise<void> {
    let polled: Awaited<ReturnType<BuildOutputs['poll']>>;
    try {
      polled = await this.#outputs.poll(ctx, this.build, run.container);
    } catch (error) {
      if (ctx.signal.aborted) throw errOf(ctx);
      throw this.#executorError(
        'exec',
        `step "${run.container.name}"`,
        new Error(`unable to read its outputs: ${describeRuntimeError(error)}`, { cause: error }),
      );
    }
    for (const value of polled.masked) {
      this.#init.writer?.addSecrets(value);
      for (const other of this.#runs.values()) other.writer?.addSecrets(value);
    }
    for (const warning of polled.warnings) this.#log.warn?.(`step ${run.container.name}: ${warning}`);
  }

  /** The image's description for the init log, or why there is none yet (its image needs outputs). */
  async #inspectStepImage(ctx: Context, step: Container): Promise<string> {
    const run = this.#run(step);
    if (run.deferred) return `> Step image ${step.image} is set when the step starts: it uses outputs of earlier steps\n`;
    return this.runtime.inspectImage(ctx, step);
  }

  /**
   * Runs one runtime call for a container. On failure, records it on the container — `canceled`,
   * a timeout, or `error` with the runtime's words — reports it and rethrows an ExecutorError (or
   * the ctx's error).
   */
  async #containerCall<T>(run: ContainerRun, phase: Phase, call: () => Promise<T>, ctx?: Context, errorExitCode = 0): Promise<T> {
    try {
      return await call();
    } catch (error) {
      const interruption = ctx !== undefined && ctx.signal.aborted ? this.#interruption(ctx) : undefined;
      // A container interrupted before it ran stays pending: destroyBuild says canceled or killed.
      if (run.kind !== 'init' && !isFinal(run.status) && (interruption === undefined || run.status === 'running')) {
        if (interruption !== undefined) {
          this.#markInterrupted(run, interruption);
        } else {
          run.status = 'error';
          run.exitCode = errorExitCode;
          run.error = this.#mask(describeRuntimeError(error));
          run.finished = Date.now();
          run.started ??= run.finished;
        }
        await this.#reportStep(run);
      }
      if (interruption !== undefined && ctx !== undefined) throw errOf(ctx);
      throw this.#executorError(phase, `${run.kind} "${run.container.name}"`, error);
    }
  }

  #markInterrupted(run: ContainerRun, why: Interruption | Outcome): void {
    run.finished = Date.now();
    run.started ??= run.finished;
    this.#apply(run, typeof why === 'string' ? interruptedOutcome(why, this.#timeoutMs) : why);
  }

  #apply(run: ContainerRun, outcome: Outcome): void {
    run.status = outcome.status;
    if (outcome.exitCode !== undefined) run.exitCode = outcome.exitCode;
    if (outcome.error !== undefined) run.error = outcome.error;
  }

  /** Why work under `ctx` (now done) stopped (build/state.ts interruptionOf); records a cancel or a timeout. */
  #interruption(ctx: Context): Interruption {
    const build = this.#contexts;
    const exec = this.#execCtx;
    const buildCanceled = build !== undefined && !build.released && build.build.signal.aborted;
    const why = interruptionOf({
      canceled: this.#record.canceled,
      buildCanceled,
      deadline: ctx.err() instanceof DeadlineExceeded || exec?.err() instanceof DeadlineExceeded,
      execCanceled: exec !== undefined && exec.signal.aborted,
    });
    this.#record.interrupted(why, () => (buildCanceled ? build.build.cause() : exec?.cause()));
    return why;
  }

  /** Runs a lifecycle phase: a failure errors the init step (before exec) and the build. */
  async #phase(ctx: Context, phase: Phase, body: () => Promise<void>): Promise<void> {
    this.#log.debug?.(`${phase} build ${this.build.id}`);
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
      const why = this.#interruption(ctx);
      if (why === 'timeout') this.#record.errored(timeoutMessage(this.#timeoutMs));
      // A cancelled build says so in its final status; anything else is the error that stopped it.
      else if (why === 'stopped') this.#record.errored(this.#mask(messageOf(error)));
      return;
    }
    this.#record.errored(this.#mask(error instanceof ExecutorError ? error.message : this.#executorError(phase, '', error).message));
  }

  async #failInit(): Promise<void> {
    const init = this.#init;
    if (isFinal(init.status)) return;
    const error = this.#record.error;
    init.status = initFailureStatus(this.#record.canceled);
    init.finished = Date.now();
    init.started ??= init.finished;
    init.error = error;
    if (error !== undefined) await this.#initLine(`> ${error}\n`);
    await this.#closeInit();
    await this.#reportStep(init);
  }

  /**
   * The container's environment, as Vela's worker makes it: the build's and the worker's
   * variables, the secrets that allow substitution, the commands as the build script, `${NAME}`
   * substituted in every field, then the secrets that do not allow substitution. Secrets the
   * container may not have are withheld and noted at the head of its log.
   */
  #prepareEnvironment(run: ContainerRun): void {
    this.#note(run, prepareEnvironment(run.container, run.kind, this.#workerVariables(), this.#secrets.loaded));
  }

  #workerVariables(): WorkerVariables {
    return {
      host: this.#host,
      runtime: this.runtime.name,
      version: this.#options.version ?? 'unknown',
      ...(this.#options.environment === undefined ? {} : { environment: this.#options.environment }),
    };
  }

  #injectSecrets(run: ContainerRun, set: SecretSet, secrets: ReadonlyMap<string, LoadedSecret> = this.#secrets.loaded): void {
    this.#note(run, injectSecrets(run.container, secrets, set));
  }

  /** Secrets withheld from the container: noted at the head of its log, and warned about. */
  #note(run: ContainerRun, notes: readonly string[]): void {
    for (const note of notes) {
      run.notes.push(note);
      this.#log.warn?.(`${run.kind} ${run.container.name}: ${note}`);
    }
  }

  /**
   * `text` (an error or a message the executor builds) with every form of every secret loaded so
   * far and of every credential the executor set in a container (VELA_NETRC_PASSWORD, tokens) masked.
   */
  #mask(text: string): string {
    return this.#secrets.mask(
      text,
      [this.#init, ...this.#runs.values()].map((run) => run.container),
    );
  }

  /** An ExecutorError for a failure: masked, and without a cause when the cause quotes a secret. */
  #executorError(phase: Phase, subject: string, error: unknown): ExecutorError {
    const detail = describeRuntimeError(error);
    const masked = this.#mask(detail);
    return new ExecutorError(phase, subject, masked, masked === detail ? { cause: error } : undefined);
  }

  /** Appends to the init log without waiting for the reporter; #closeInit waits for the lines. */
  #initLine(text: string): Promise<void> {
    this.#streams.initLog.line(text);
    return Promise.resolve();
  }

  async #closeInit(): Promise<void> {
    await this.#streams.initLog.close();
  }

  #requestStream(run: ContainerRun): Promise<void> {
    return this.#streams.request(run, run.kind === 'service' ? this.streamService.bind(this) : this.streamStep.bind(this));
  }

  /** The destroy sequence's settings: each removal, and each wait for a log stream, in its own cleanup budget. */
  #destroyOptions(): DestroyOptions {
    return { runtime: this.runtime, budgetMs: this.#options.cleanupTimeoutMs ?? 120_000, logger: this.#log };
  }

  /** Removes the container (build/destroy.ts), then reports the final status of a container that had none. */
  async #destroyContainer(ctx: Context, run: ContainerRun): Promise<void> {
    const container = run.container;
    // A slow stream waits in its own budget (the stream itself is cut by the log-streaming grace).
    await removeContainerOf(ctx, run, (budget) => this.#streams.waitFor(budget, run), this.#destroyOptions());
    if (!run.streaming && run.writer !== undefined) await run.writer.close();
    const outcome = unfinishedOutcome(run, this.#record.facts(this.#timeoutMs));
    if (outcome !== undefined) {
      if (outcome.how === 'interrupted') {
        this.#markInterrupted(run, outcome);
      } else {
        this.#apply(run, outcome);
        if (outcome.how === 'ended') container.exit_code = run.exitCode;
        if (outcome.how === 'ended' || outcome.status === 'killed') run.finished = Date.now();
      }
      await this.#reportStep(run);
    }
  }

  #onRuntimeEvent(event: RuntimeEvent): void {
    if (this.#reporter.runtimeEvent === undefined) return;
    const run = this.#runs.get(event.containerId);
    if (run === undefined) return;
    const masked = event.type === 'notice' ? { ...event, message: this.#mask(event.message) } : event;
    this.#reporter.runtimeEvent(this.#reportCtx, run.target, masked);
  }

  async #reportStep(run: ContainerRun): Promise<void> {
    try {
      await this.#reporter.stepStatus(this.#reportCtx, run.report());
    } catch (error) {
      this.#log.warn?.(`reporter stepStatus ${run.container.name}: ${messageOf(error)}`);
    }
  }

  async #reportBuild(): Promise<void> {
    try {
      await this.#reporter.buildStatus(this.#reportCtx, this.report());
    } catch (error) {
      this.#log.warn?.(`reporter buildStatus: ${messageOf(error)}`);
    }
  }
}

/** `logger` with every message masked by `mask` first. */
function maskedLogger(logger: ExecutorLogger, mask: (text: string) => string): ExecutorLogger {
  const out: ExecutorLogger = {};
  for (const level of ['debug', 'info', 'warn'] as const) {
    if (logger[level] !== undefined) out[level] = (message) => logger[level]?.(mask(message));
  }
  return out;
}
