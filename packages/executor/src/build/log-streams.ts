/**
 * The log side of a build: the writer of each container's log (masker → cap → batches → the
 * reporter) and the init log's ordered chain.
 */
import type { Context } from '@berth/context';
import { messageOf } from '../errors.ts';
import { LogWriter } from '../log/log-writer.ts';
import type { LogOptions } from '../executor.ts';
import type { Reporter, Target } from '../reporter.ts';

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
