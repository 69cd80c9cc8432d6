/**
 * What every part of one build's run shares (executor.ts, steps.ts, stages.ts): the build copy,
 * the runtime, the container runs, secrets, outputs, the log streams, the build record, and the
 * helpers that run a container's runtime call, record interruptions, mask and report.
 */
import { hostname } from 'node:os';
import { background, type Context, DeadlineExceeded, errOf, withoutCancel, withTimeout } from '@berth/context';
import { type Build, type Container, emptyContainer } from '@berth/pipeline';
import type { Runtime } from '@berth/runtime';
import { ExecutorError, messageOf, type Phase } from '../errors.ts';
import type { ExecutorLogger, ExecutorOptions } from '../options.ts';
import { BuildOutputs } from '../outputs/build-outputs.ts';
import { nullReporter, type Reporter } from '../reporter.ts';
import { injectSecrets, type LoadedSecret, type SecretSet } from '../secrets.ts';
import { isFinal } from '../status.ts';
import { BuildSecrets } from './build-secrets.ts';
import { describeRuntimeError } from './checks.ts';
import { ContainerRun, copyBuild } from './container-run.ts';
import { type BuildContextState, type Deferred, deferred, untilDone } from './contexts.ts';
import { type DestroyOptions, removeContainerOf } from './destroy.ts';
import { prepareEnvironment, type WorkerVariables } from './environment.ts';
import { LogStreams } from './log-streams.ts';
import { BuildRecord, type Interruption, interruptedOutcome, interruptionOf, type Outcome, unfinishedOutcome } from './state.ts';

/** The init step's name, and the image of an init step the pipeline did not have. */
export const INIT_NAME = 'init';
const INIT_IMAGE = '#init';

/** One build's shared state and helpers. Internal to the executor: one per {@link Executor}. */
export class BuildCore {
  readonly build: Build;
  readonly runtime: Runtime;
  readonly reporter: Reporter;
  readonly options: ExecutorOptions;
  readonly timeoutMs: number;
  readonly streamGraceMs: number;
  readonly host: string;
  readonly log: ExecutorLogger;
  readonly streams: LogStreams<ContainerRun>;
  readonly runs = new Map<string, ContainerRun>();
  readonly init: ContainerRun;
  /** Secrets loaded so far (by secret name). */
  readonly secrets: BuildSecrets;
  readonly outputs: BuildOutputs;
  readonly record = new BuildRecord();
  /** Settles when each stage (by name) has run: planStage waits for the stages it needs. */
  readonly stageDone = new Map<string, Deferred>();
  /** Set when exec is over (or destroy began): no container is set up ahead any more (build/steps.ts setUpAhead). */
  aheadStopped = false;
  /** Resolves when {@link aheadStopped} is set: wakes a chain waiting for a place for a held start. */
  readonly aheadOver = deferred();
  reportCtx: Context = background();
  execCtx: Context | undefined;
  contexts: BuildContextState | undefined;

  constructor(options: ExecutorOptions) {
    this.options = options;
    this.build = copyBuild(options.build);
    this.runtime = options.runtime;
    this.reporter = options.reporter ?? nullReporter;
    this.timeoutMs = options.timeoutMs ?? 30 * 60_000;
    this.streamGraceMs = options.logStreamingGraceMs ?? 60_000;
    this.host = options.host ?? hostname();
    this.log = maskedLogger(options.logger ?? {}, (text) => this.mask(text));
    this.outputs = new BuildOutputs(this.runtime, options.outputs === true);
    this.secrets = new BuildSecrets({
      loader: options.loadSecret,
      maskedOutputs: () => this.outputs.maskedValues(),
      onLoaded: (value) => {
        this.init.writer?.addSecrets(value);
        for (const run of this.runs.values()) run.writer?.addSecrets(value);
      },
    });

    const initStep = this.build.steps.find((s) => s.name === INIT_NAME) ?? this.build.stages.find((s) => s.name === INIT_NAME)?.steps[0];
    this.init = new ContainerRun('init', initStep ?? emptyContainer({ id: `${this.build.id}_init`, name: INIT_NAME, image: INIT_IMAGE }));
    for (const service of this.build.services) this.runs.set(service.id, new ContainerRun('service', service));
    for (const step of this.build.steps) if (step !== initStep) this.runs.set(step.id, new ContainerRun('step', step));
    for (const stage of this.build.stages) {
      if (stage.name === INIT_NAME) continue;
      for (const step of stage.steps) this.runs.set(step.id, new ContainerRun('step', step, stage.name));
    }
    this.streams = new LogStreams<ContainerRun>({
      runtime: this.runtime,
      reporter: this.reporter,
      init: this.init,
      runs: this.runs,
      reportCtx: () => this.reportCtx,
      logger: this.log,
      logs: options.logs ?? {},
      streamGraceMs: this.streamGraceMs,
      secretsFor: (run) => this.secrets.valuesFor(run.container),
    });
  }

  /** No container is set up ahead any more (exec is over, or destroy began). */
  stopAhead(): void {
    this.aheadStopped = true;
    this.aheadOver.resolve();
  }

  /** Records the ctx a lifecycle method was called with (the exec ctx). */
  enter(ctx: Context): void {
    this.execCtx = ctx;
    if (this.contexts === undefined) this.reportCtx = withoutCancel(ctx);
  }

  /** The run of a container of this build; rejects a container that is not part of it. */
  run(container: Container): ContainerRun {
    if (container === this.init.container || container.id === this.init.container.id) return this.init;
    const run = this.runs.get(container.id);
    if (run === undefined) throw new ExecutorError('exec', `container "${container.name}"`, `${container.id} is not part of build ${this.build.id}`);
    return run;
  }

  /**
   * Runs one runtime call for a container. On failure, records it on the container — `canceled`,
   * a timeout, or `error` with the runtime's words — reports it and rethrows an ExecutorError (or
   * the ctx's error).
   */
  async containerCall<T>(run: ContainerRun, phase: Phase, call: () => Promise<T>, ctx?: Context, errorExitCode = 0): Promise<T> {
    try {
      return await call();
    } catch (error) {
      const interruption = ctx !== undefined && ctx.signal.aborted ? this.interruption(ctx) : undefined;
      // A container interrupted before it ran stays pending: destroyBuild says canceled or killed.
      if (run.kind !== 'init' && !isFinal(run.status) && (interruption === undefined || run.status === 'running')) {
        if (interruption !== undefined) {
          this.markInterrupted(run, interruption);
        } else {
          run.status = 'error';
          run.exitCode = errorExitCode;
          run.error = this.mask(describeRuntimeError(error));
          run.finished = Date.now();
          run.started ??= run.finished;
        }
        await this.reportStep(run);
      }
      if (interruption !== undefined && ctx !== undefined) throw errOf(ctx);
      throw this.executorError(phase, `${run.kind} "${run.container.name}"`, error);
    }
  }

  markInterrupted(run: ContainerRun, why: Interruption | Outcome): void {
    run.finished = Date.now();
    run.started ??= run.finished;
    this.apply(run, typeof why === 'string' ? interruptedOutcome(why, this.timeoutMs) : why);
  }

  apply(run: ContainerRun, outcome: Outcome): void {
    run.status = outcome.status;
    if (outcome.exitCode !== undefined) run.exitCode = outcome.exitCode;
    if (outcome.error !== undefined) run.error = outcome.error;
  }

  /** Why work under `ctx` (now done) stopped (build/state.ts interruptionOf); records a cancel or a timeout. */
  interruption(ctx: Context): Interruption {
    const build = this.contexts;
    const exec = this.execCtx;
    const buildCanceled = build !== undefined && !build.released && build.build.signal.aborted;
    const why = interruptionOf({
      canceled: this.record.canceled,
      buildCanceled,
      deadline: ctx.err() instanceof DeadlineExceeded || exec?.err() instanceof DeadlineExceeded,
      execCanceled: exec !== undefined && exec.signal.aborted,
    });
    this.record.interrupted(why, () => (buildCanceled ? build.build.cause() : exec?.cause()));
    return why;
  }

  /**
   * The container's environment, as Vela's worker makes it: the build's and the worker's
   * variables, the secrets that allow substitution, the commands as the build script, `${NAME}`
   * substituted in every field, then the secrets that do not allow substitution. Secrets the
   * container may not have are withheld and noted at the head of its log.
   */
  prepareEnvironment(run: ContainerRun): void {
    this.note(run, prepareEnvironment(run.container, run.kind, this.workerVariables(), this.secrets.loaded));
  }

  workerVariables(): WorkerVariables {
    return {
      host: this.host,
      runtime: this.runtime.name,
      version: this.options.version ?? 'unknown',
      ...(this.options.environment === undefined ? {} : { environment: this.options.environment }),
    };
  }

  injectSecrets(run: ContainerRun, set: SecretSet, secrets: ReadonlyMap<string, LoadedSecret> = this.secrets.loaded): void {
    this.note(run, injectSecrets(run.container, secrets, set));
  }

  /** Secrets withheld from the container: noted at the head of its log, and warned about. */
  note(run: ContainerRun, notes: readonly string[]): void {
    for (const note of notes) {
      run.notes.push(note);
      this.log.warn?.(`${run.kind} ${run.container.name}: ${note}`);
    }
  }

  /**
   * `text` (an error or a message the executor builds) with every form of every secret loaded so
   * far and of every credential the executor set in a container (VELA_NETRC_PASSWORD, tokens) masked.
   */
  mask(text: string): string {
    return this.secrets.mask(
      text,
      [this.init, ...this.runs.values()].map((run) => run.container),
    );
  }

  /** An ExecutorError for a failure: masked, and without a cause when the cause quotes a secret. */
  executorError(phase: Phase, subject: string, error: unknown): ExecutorError {
    const detail = describeRuntimeError(error);
    const masked = this.mask(detail);
    return new ExecutorError(phase, subject, masked, masked === detail ? { cause: error } : undefined);
  }

  /** Appends to the init log without waiting for the reporter; closeInit waits for the lines. */
  initLine(text: string): Promise<void> {
    this.streams.initLog.line(text);
    return Promise.resolve();
  }

  async closeInit(): Promise<void> {
    await this.streams.initLog.close();
  }

  /** Asks for the container's log to be streamed (streamBuild serves it with `stream`). */
  requestStream(run: ContainerRun, stream: (ctx: Context, container: Container) => Promise<void>): Promise<void> {
    return this.streams.request(run, stream);
  }

  /** The destroy sequence's settings: each removal, and each wait for a log stream, in its own cleanup budget. */
  destroyOptions(): DestroyOptions {
    return { runtime: this.runtime, budgetMs: this.options.cleanupTimeoutMs ?? 120_000, logger: this.log };
  }

  /** Removes the container (build/destroy.ts), then reports the final status of a container that had none. */
  async destroyContainer(ctx: Context, run: ContainerRun): Promise<void> {
    const container = run.container;
    // A container set up ahead of its step (build/steps.ts setUpAhead): removed once its setup settled.
    if (run.creating !== undefined) {
      const [budget, cancel] = withTimeout(ctx, this.destroyOptions().budgetMs);
      try {
        await untilDone(budget, run.creating).catch(() => undefined);
      } finally {
        cancel();
      }
    }
    // A slow stream waits in its own budget (the stream itself is cut by the log-streaming grace).
    await removeContainerOf(ctx, run, (budget) => this.streams.waitFor(budget, run), this.destroyOptions());
    if (!run.streaming && run.writer !== undefined) await run.writer.close();
    const outcome = unfinishedOutcome(run, this.record.facts(this.timeoutMs));
    if (outcome !== undefined) {
      if (outcome.how === 'interrupted') {
        this.markInterrupted(run, outcome);
      } else {
        this.apply(run, outcome);
        if (outcome.how === 'ended') container.exit_code = run.exitCode;
        if (outcome.how === 'ended' || outcome.status === 'killed') run.finished = Date.now();
      }
      await this.reportStep(run);
    }
  }

  async reportStep(run: ContainerRun): Promise<void> {
    try {
      await this.reporter.stepStatus(this.reportCtx, run.report());
    } catch (error) {
      this.log.warn?.(`reporter stepStatus ${run.container.name}: ${messageOf(error)}`);
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
