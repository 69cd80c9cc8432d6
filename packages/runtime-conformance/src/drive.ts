import type { Readable } from 'node:stream';
import { background, withTimeout, type Context } from '@berth/context';
import type { Build, Container } from '@berth/pipeline';
import { RuntimeError, type ContainerExit, type Runtime } from '@berth/runtime';

/** What {@link runToCompletion} returns. */
export interface RunResult {
  /** What {@link Runtime.waitContainer} resolved with. */
  exit: ContainerExit;
  /** The whole combined log as UTF-8 text. */
  logs: string;
  /** The whole combined log as bytes. */
  bytes: Buffer;
  /**
   * True when the live log stream ended while the container still ran and a tail opened after
   * the exit had more: the runtime's `tailContainer` does not follow the container to its end.
   * Only with `earlyEnd: 'reread'`; `logs` then holds the re-read log.
   */
  liveTailEndedEarly: boolean;
}

/** Options of {@link runToCompletion}. */
export interface RunOptions {
  /** The parent ctx (default: background). */
  ctx?: Context;
  /** Bound on the whole run, logs included (default 60 000 ms); past it the run rejects `DeadlineExceeded`. */
  timeoutMs?: number;
  /**
   * What to do when the live log stream ended while the container still ran and a tail opened
   * after the exit holds more: `reject` (default) with an {@link EarlyTailEndError} naming that
   * cause, or `reread`: return the re-read log with `liveTailEndedEarly` set (the conformance
   * suite does this so that one case, not every case that reads a log, reports the fault).
   */
  earlyEnd?: 'reject' | 'reread';
}

/**
 * The live log stream of a container ended before the container exited: the runtime's
 * `tailContainer` must follow the container until it exits and every byte was delivered.
 */
export class EarlyTailEndError extends Error {
  override readonly name = 'EarlyTailEndError';
  /** What the live stream delivered before it ended. */
  readonly live: string;
  /** What a tail opened after the exit returned. */
  readonly complete: string;

  constructor(container: string, state: string, live: string, complete: string) {
    super(
      `[berth] conformance: the log stream of ${container} ended while the container was still ${state}; ` +
        `it delivered ${JSON.stringify(clip(live))} but a tail opened after the exit returned ${JSON.stringify(clip(complete))}. ` +
        'tailContainer must follow the container until it exits and every byte was delivered ' +
        '(a stream that stops at the log written so far, or after an idle or read timeout, ends too early).',
    );
    this.live = live;
    this.complete = complete;
  }
}

function clip(text: string): string {
  return text.length > 300 ? `${text.slice(0, 150)}…${text.slice(-150)}` : text;
}

/** Every container of a build in the order the executor sets them up: services, then steps (stage by stage). */
export function buildContainers(build: Build): Container[] {
  return [...build.services, ...build.steps, ...build.stages.flatMap((stage) => stage.steps)];
}

/**
 * Prepares a build as the executor does before running anything: setupBuild → createNetwork →
 * createVolume → setupContainer for every service and step → assembleBuild.
 *
 * Gotcha: on failure the build is left as far as it got; call {@link teardownBuild} (or
 * `removeBuild`) either way.
 */
export async function setupBuildResources(ctx: Context, runtime: Runtime, build: Build): Promise<void> {
  await runtime.setupBuild(ctx, build);
  await runtime.createNetwork(ctx, build);
  await runtime.createVolume(ctx, build);
  for (const container of buildContainers(build)) {
    await runtime.setupContainer(ctx, container, build);
  }
  await runtime.assembleBuild(ctx, build);
}

/**
 * Removes a build as the executor does: removeContainer for every container → removeVolume →
 * removeNetwork → removeBuild. Tries every step even when one fails, then rejects with the first failure.
 */
export async function teardownBuild(ctx: Context, runtime: Runtime, build: Build): Promise<void> {
  const failures: unknown[] = [];
  const attempt = async (work: () => Promise<void>): Promise<void> => {
    try {
      await work();
    } catch (error) {
      failures.push(error);
    }
  };
  for (const container of buildContainers(build)) await attempt(() => runtime.removeContainer(ctx, container));
  await attempt(() => runtime.removeVolume(ctx, build));
  await attempt(() => runtime.removeNetwork(ctx, build));
  await attempt(() => runtime.removeBuild(ctx, build));
  if (failures.length > 0) throw failures[0];
}

/**
 * Reads a log stream to its end, bounded by `ctx`: when `ctx` ends first the stream is destroyed
 * and the promise rejects with a `RuntimeError` (`Canceled`/`DeadlineExceeded`), even if the
 * plugin's stream ignores its own ctx.
 */
export async function collectStream(ctx: Context, stream: Readable, onChunk?: (chunk: Buffer) => void | Promise<void>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  const onAbort = (): void => {
    stream.destroy(contextError(ctx, 'tailContainer'));
  };
  if (ctx.signal.aborted) onAbort();
  ctx.signal.addEventListener('abort', onAbort, { once: true });
  try {
    for await (const chunk of stream) {
      const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer);
      if (onChunk) {
        await onChunk(buffer);
      } else {
        chunks.push(buffer);
      }
    }
  } finally {
    ctx.signal.removeEventListener('abort', onAbort);
  }
  return Buffer.concat(chunks);
}

/**
 * Runs one container of a build that {@link setupBuildResources} prepared, the way the executor
 * runs a step: runContainer → tailContainer (read to its end) and waitContainer together.
 * Resolves with the exit and the complete logs; the container is left for removal.
 *
 * Gotcha: bounded by `timeoutMs` (60 s by default) so a runtime that never ends a stream cannot
 * hang a test; the log stream is destroyed whenever the run fails.
 */
export async function runToCompletion(runtime: Runtime, build: Build, container: Container, options: RunOptions = {}): Promise<RunResult> {
  const [ctx, cancel] = withTimeout(options.ctx ?? background(), options.timeoutMs ?? 60_000);
  let stream: Readable | undefined;
  try {
    await runtime.runContainer(ctx, container, build);
    stream = await runtime.tailContainer(ctx, container);
    const live = stream;
    // The state right after the stream ended: "running" there is the sign of a tail that stops early
    // (a lagging status alone is told apart below by re-reading the log after the exit).
    const reading = collectStream(ctx, live).then(async (data) => ({
      data,
      stateAtEnd: (await runtime.inspectContainer(ctx, container).catch(() => undefined))?.state,
    }));
    const [{ data, stateAtEnd }, exit] = await Promise.all([reading, runtime.waitContainer(ctx, container)]);
    if (stateAtEnd === 'running' || stateAtEnd === 'created') {
      const complete = await collectStream(ctx, await runtime.tailContainer(ctx, container));
      if (complete.length > data.length) {
        if (options.earlyEnd !== 'reread') throw new EarlyTailEndError(container.name, stateAtEnd, data.toString('utf8'), complete.toString('utf8'));
        return { exit, bytes: complete, logs: complete.toString('utf8'), liveTailEndedEarly: true };
      }
    }
    return { exit, bytes: data, logs: data.toString('utf8'), liveTailEndedEarly: false };
  } finally {
    if (stream && !stream.readableEnded) stream.destroy();
    cancel();
  }
}

/**
 * The log a container has written so far, for assertion messages: a tail read for at most
 * `limitMs` (default 2 000), then destroyed. Never rejects: a failure is described in the text.
 */
export async function logSoFar(runtime: Runtime, container: Container, limitMs = 2_000): Promise<string> {
  const [ctx, cancel] = withTimeout(background(), limitMs);
  const chunks: Buffer[] = [];
  let stream: Readable | undefined;
  try {
    stream = await runtime.tailContainer(ctx, container);
    await collectStream(ctx, stream, (chunk) => {
      chunks.push(chunk);
    });
    return Buffer.concat(chunks).toString('utf8');
  } catch (error) {
    const so = Buffer.concat(chunks).toString('utf8');
    if (ctx.signal.aborted && so !== '') return so;
    return `${so}[no complete log: ${error instanceof Error ? error.message : String(error)}]`;
  } finally {
    if (stream && !stream.readableEnded) stream.destroy();
    cancel();
  }
}

/** Waits for `container` to exit without reading its logs, bounded by `timeoutMs` (default 60 s). */
export async function waitForExit(runtime: Runtime, container: Container, timeoutMs = 60_000): Promise<ContainerExit> {
  const [ctx, cancel] = withTimeout(background(), timeoutMs);
  try {
    return await runtime.waitContainer(ctx, container);
  } finally {
    cancel();
  }
}

/** A `RuntimeError` of the code matching `ctx`'s end, for helpers that abort on a ctx. */
function contextError(ctx: Context, operation: string): RuntimeError {
  const code = ctx.err()?.name === 'DeadlineExceeded' ? 'DeadlineExceeded' : 'Canceled';
  return new RuntimeError(code, `the ${code === 'Canceled' ? 'context was canceled' : 'deadline passed'}`, {
    runtime: 'conformance',
    operation,
    cause: ctx.err(),
  });
}
