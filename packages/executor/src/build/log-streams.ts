/**
 * The log side of a build: the stream-request channel and the streams it serves, the writer of
 * each container's log (masker → cap → batches → the reporter) and the init log's ordered chain.
 */
import { background, Channel, type Context, TaskGroup } from '@berth/context';
import type { Container } from '@berth/pipeline';
import type { Runtime } from '@berth/runtime';
import { messageOf } from '../errors.ts';
import type { LogOptions } from '../options.ts';
import { LogWriter, pumpLog } from '../log/log-writer.ts';
import type { Reporter, Target, TargetKind } from '../reporter.ts';
import { type Deferred, settleWithin } from './contexts.ts';

/** What {@link makeLogWriter} needs of the build. */
export interface LogWriterContext {
  readonly reporter: Reporter;
  /** The ctx appends go with: the stream ctx for a container's log, the report ctx for init. */
  readonly appendCtx: () => Context;
  /** The detached ctx for status, closing, and the last batch after the stream ctx ended. */
  readonly reportCtx: () => Context;
  readonly warn: (message: string) => void;
  readonly logs: LogOptions;
  /** The values masked in this log. */
  readonly secrets: Iterable<string>;
}

/**
 * One container's log writer. Once the append ctx ended (the log-streaming grace is over)
 * nothing more is read; what was read before (the last batch, the masker's held-back bytes, the
 * cap's tail) is still delivered as the log is closed, under the report ctx. Reporter failures are
 * warned about, never thrown.
 */
export function makeLogWriter(target: Target, context: LogWriterContext): LogWriter {
  const writer: LogWriter = new LogWriter(
    {
      append: (chunk) => {
        let ctx = context.appendCtx();
        if (ctx.signal.aborted) {
          if (!writer.closed) return Promise.resolve();
          ctx = context.reportCtx();
        }
        return context.reporter.appendLog(ctx, target, chunk).catch((error: unknown) => {
          context.warn(`reporter appendLog ${target.name}: ${messageOf(error)}`);
        });
      },
      close: () =>
        context.reporter.closeLog(context.reportCtx(), target).catch((error: unknown) => {
          context.warn(`reporter closeLog ${target.name}: ${messageOf(error)}`);
        }),
    },
    { ...context.logs, secrets: context.secrets },
  );
  return writer;
}

/**
 * The init log's lines, appended without waiting for the reporter (the setup phases are not
 * slowed by a slow reporter; the init log is small) and delivered in order; `close` waits for them.
 */
export class InitLog {
  readonly #writer: () => LogWriter;
  #chain: Promise<void> = Promise.resolve();

  constructor(writer: () => LogWriter) {
    this.#writer = writer;
  }

  /** Queues `text` (a newline is added when missing); empty text is ignored. */
  line(text: string): void {
    if (text === '') return;
    const writer = this.#writer();
    const line = text.endsWith('\n') ? text : `${text}\n`;
    this.#chain = this.#chain.then(() => writer.write(line));
  }

  /** Waits for the queued lines, then closes the log (a log nobody wrote to is still complete). */
  async close(): Promise<void> {
    await this.#chain;
    await this.#writer().close();
  }
}

/**
 * A request to stream one container's log, sent by execStep / execService after `runContainer`
 * and served by `Executor.streamBuild` (Vela's `message.StreamRequest`).
 */
export interface StreamRequest {
  kind: 'step' | 'service';
  container: Container;
  stream: (ctx: Context, container: Container) => Promise<void>;
}

/** What {@link LogStreams} knows of one container of the build (the executor's ContainerRun). */
export interface StreamedRun {
  readonly kind: TargetKind;
  readonly container: Container;
  readonly target: Target;
  /** A stream request was sent; `streamDone` settles when its stream ended. */
  streaming: boolean;
  /** runContainer and waitContainer resolved: the container has ended. */
  readonly exited: boolean;
  readonly streamDone: Deferred;
  writer: LogWriter | undefined;
  /** Lines for the head of this container's log. */
  readonly notes: string[];
}

/** What {@link LogStreams} needs of the executor. */
export interface LogStreamsOptions<R extends StreamedRun> {
  readonly runtime: Runtime;
  readonly reporter: Reporter;
  /** The init step's run: its log is the {@link InitLog}. */
  readonly init: R;
  /** The build's containers, by container id. */
  readonly runs: ReadonlyMap<string, R>;
  /** The detached ctx for status, closing, and the last batch after the stream ctx ended. */
  readonly reportCtx: () => Context;
  readonly logger: { debug?(message: string): void; warn?(message: string): void };
  readonly logs: LogOptions;
  /** The log-streaming grace: how long streams may outlive the build's containers (for the cut note). */
  readonly streamGraceMs: number;
  /** Every value masked in this container's log. */
  readonly secretsFor: (run: R) => string[];
}

/**
 * The build's log streams, owned by the Executor: the stream-request channel (Vela's
 * `streamRequests`), each container's stream and writer, the serving loop of streamBuild, the
 * wait for streams before destroy, and the init log.
 */
export class LogStreams<R extends StreamedRun> {
  readonly #options: LogStreamsOptions<R>;
  readonly #requests: Channel<StreamRequest>;
  /** The stream ctx (contexts() or streamBuild's): stream requests are accepted while it lives. */
  #streamCtx: Context | undefined;
  readonly initLog: InitLog;

  constructor(options: LogStreamsOptions<R>) {
    this.#options = options;
    // Buffered for every container: a send never waits, even when nobody streams.
    this.#requests = new Channel<StreamRequest>(options.runs.size + 1);
    this.initLog = new InitLog(() => this.writer(options.init, options.reportCtx));
  }

  /** Sets the stream ctx requests are sent with (the first one set wins). */
  useStreamCtx(ctx: Context): void {
    this.#streamCtx ??= ctx;
  }

  /** No more stream requests: streamBuild returns once the ones sent are served. */
  close(): void {
    this.#requests.close();
  }

  /** The container's log writer (made once): appends go with `appendCtx`. */
  writer(run: R, appendCtx: () => Context): LogWriter {
    run.writer ??= makeLogWriter(run.target, {
      reporter: this.#options.reporter,
      appendCtx,
      reportCtx: this.#options.reportCtx,
      warn: (message) => this.#options.logger.warn?.(message),
      logs: this.#options.logs,
      secrets: this.#options.secretsFor(run),
    });
    return run.writer;
  }

  /** Asks for the container's log to be streamed by `stream` (the Executor's streamStep / streamService). */
  async request(run: R, stream: StreamRequest['stream']): Promise<void> {
    run.streaming = true;
    const kind = run.kind === 'service' ? 'service' : 'step';
    try {
      await this.#requests.send(this.#streamCtx ?? background(), { kind, container: run.container, stream });
    } catch {
      // execBuild is over or the stream ctx ended: nobody will stream this container.
      await this.finish(run);
    }
  }

  /** Streams the container's log until it ended and every byte was delivered, or `ctx` ends. Never rejects. */
  async stream(ctx: Context, run: R): Promise<void> {
    const log = this.#options.logger;
    let note: string | undefined;
    try {
      const writer = this.writer(run, () => ctx);
      for (const note of run.notes.splice(0)) await writer.write(`> ${note}\n`);
      log.debug?.(`streaming ${run.kind} ${run.container.name}`);
      const readable = await this.#options.runtime.tailContainer(ctx, run.container);
      await pumpLog(ctx, readable, writer);
      log.debug?.(`streamed ${run.kind} ${run.container.name}: ${writer.bytesIn} bytes`);
    } catch (error) {
      if (ctx.signal.aborted) note = cutNote(this.#options.streamGraceMs);
      else log.warn?.(`streaming ${run.kind} ${run.container.name}: ${messageOf(error)}`);
    } finally {
      await this.finish(run, note);
    }
  }

  /** Closes the container's log with what arrived (and `note` as its last line) and marks its stream done. */
  async finish(run: R, note?: string): Promise<void> {
    try {
      await this.writer(run, this.#options.reportCtx).close(note);
    } finally {
      run.streamDone.resolve();
    }
  }

  /** streamBuild: serves requests in a task group until the channel closes or `ctx` ends. Never rejects. */
  async serve(ctx: Context): Promise<void> {
    this.useStreamCtx(ctx);
    const group = new TaskGroup(ctx);
    try {
      for await (const request of this.#requests.iterate(ctx)) {
        group.go(async (streamCtx) => {
          try {
            await request.stream(streamCtx, request.container);
          } catch (error) {
            this.#options.logger.warn?.(`streaming ${request.kind} ${request.container.name}: ${messageOf(error)}`);
          }
        });
      }
    } catch {
      // ctx ended: stop taking requests.
    } finally {
      await group.wait().catch(() => undefined);
      // Requests nobody will serve: their logs are complete as they are.
      for (;;) {
        const left = this.#requests.length > 0 ? await this.#requests.receive(background()) : undefined;
        if (left === undefined || !left.ok) break;
        const run = this.#options.runs.get(left.value.container.id);
        if (run !== undefined) await this.finish(run);
      }
    }
  }

  /** waitForStreams: until the streams of containers that have ended are complete, or `ctx` ends. */
  async waitForEnded(ctx: Context): Promise<void> {
    const pending = [...this.#options.runs.values()].filter((r) => r.streaming && r.exited).map((r) => r.streamDone.promise);
    await settleWithin(
      ctx,
      Promise.all(pending).then(() => undefined),
    );
  }

  /** Waits for the container's stream to end (if one was requested), bounded by `ctx`. */
  async waitFor(ctx: Context, run: R): Promise<void> {
    if (!run.streaming) return;
    await settleWithin(ctx, run.streamDone.promise);
  }
}

/**
 * The last line of a log whose stream the log-streaming grace cut: the stream was still open that
 * long after the build's containers were done (a process the step left running holds the engine's
 * stream open, or the engine stalled). Vela stops such a stream silently.
 */
function cutNote(graceMs: number): string {
  const grace = graceMs >= 1000 ? `${Math.round(graceMs / 100) / 10} s` : `${graceMs / 1000} s`;
  return `> the log stream was cut ${grace} after the build's containers were done (the log-streaming timeout, --executor-log-streaming-timeout); anything written after this point is not in this log`;
}
