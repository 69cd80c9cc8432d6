/**
 * A runtime wrapper that injects faults into ANY runtime, decided by a seed: delays and errors on
 * any call, log streams that stall, arrive in odd pieces, end early, fail or never end, and an
 * engine outage ("unavailable") in the middle of a build.
 *
 * Decisions are keyed by (seed, operation, subject, n-th call of that pair), not by the global
 * order of calls, so a seed replays the same faults even when streams and steps interleave
 * differently on a loaded machine.
 *
 * Everything injected honours the call's ctx as the contract asks (`Runtime` in
 * packages/runtime/src/runtime.ts): a delay ends with `Canceled`/`DeadlineExceeded` when the ctx
 * ends, a stalled or endless stream is destroyed with the ctx's code. go-vela/worker has no such
 * harness; its closest relative is the mock runtime in `runtime/docker/docker.go` (NewMock).
 */
import { PassThrough, type Readable } from 'node:stream';
import { afterFunc, type Context, errOf, sleep } from '@berth/context';
import type { Build, Container } from '@berth/pipeline';
import { type Runtime, RuntimeError, type RuntimeErrorCode } from '@berth/runtime';
import { prng } from '../prng.ts';

/** The runtime methods, as the wrapper names calls. */
export type RuntimeMethod = Exclude<keyof Runtime, 'name' | 'setupWhileRunning'>;

/** Calls that remove what a build created: a fault there may leave resources for `reap`. */
export const CLEANUP_CALLS: ReadonlySet<RuntimeMethod> = new Set(['removeContainer', 'removeVolume', 'removeNetwork', 'removeBuild']);

/** How a log stream misbehaves. */
export type StreamFault =
  /** Pauses for a while, then goes on. */
  | 'stall'
  /** Re-cut into pieces of 1–7 bytes (split-safety of the masker). */
  | 'shred'
  /** Ends cleanly before the container's log does (the rest is lost). */
  | 'end-early'
  /** Fails with `Unavailable` part way. */
  | 'error'
  /** Delivers everything, then never ends until its ctx does. */
  | 'never-end';

/** How often each fault happens; every rate is a probability in [0, 1]. */
export interface FaultOptions {
  seed: number;
  /** A call waits first (honouring ctx). */
  delayRate?: number;
  /** The longest such wait. */
  maxDelayMs?: number;
  /** A call fails before reaching the engine. */
  errorRate?: number;
  /** A call reaches the engine, which does the work, but the answer is lost (fails `Unavailable`). */
  lostReplyRate?: number;
  /** Errors on cleanup calls too (removeContainer, removeVolume, removeNetwork, removeBuild). */
  cleanupErrors?: boolean;
  /** A tailed stream gets one of `streamFaults`. */
  streamRate?: number;
  /** Which stream faults may happen. Default: all but `never-end`. */
  streamFaults?: readonly StreamFault[];
  /** The longest stall of a `stall` stream. */
  maxStallMs?: number;
  /**
   * An outage: from the `at`-th call of the build on, `calls` calls fail `Unavailable`, and
   * streams open when it starts fail.
   */
  outage?: { at: number; calls: number };
}

/** One fault that happened, for the soak's report and its invariants. */
interface InjectedFault {
  /** 0-based number of the call in arrival order. */
  call: number;
  operation: RuntimeMethod;
  subject: string;
  kind: 'delay' | 'error' | 'lost-reply' | 'outage' | `stream:${StreamFault}`;
  detail?: string;
}

const ERROR_CODES: Partial<Record<RuntimeMethod, RuntimeErrorCode[]>> = {
  setupContainer: ['ImagePullFailed', 'ImageNotFound', 'Unavailable', 'Internal'],
  runContainer: ['ContainerFailed', 'Unavailable', 'Internal'],
  holdContainer: ['ImageNotFound', 'ContainerFailed', 'Unavailable', 'Internal'],
  releaseContainer: ['ContainerFailed', 'Unavailable'],
  waitContainer: ['ContainerFailed', 'Unavailable'],
  createImage: ['ImagePullFailed', 'Unavailable'],
};

/** FNV-1a over a string: a stable 32-bit key for (operation, subject, n). */
function hash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

function subjectOf(args: unknown[]): string {
  const first = args[0] as Partial<Container & Build> | undefined;
  if (typeof first === 'string') return first;
  return typeof first?.id === 'string' ? first.id : '';
}

function ctxError(ctx: Context, runtime: string, operation: string, subject: string): RuntimeError {
  const err = errOf(ctx);
  return new RuntimeError(err.name === 'DeadlineExceeded' ? 'DeadlineExceeded' : 'Canceled', 'the context ended', { runtime, operation, subject, cause: err });
}

/** A runtime with faults, and what it injected. */
export interface FaultyRuntime {
  readonly runtime: Runtime;
  /** Faults injected so far, in order. */
  readonly injected: InjectedFault[];
  /** Number of calls so far. */
  readonly calls: number;
  /** Called on every call, before any fault (a soak cancels a build at its k-th call). */
  onCall: ((n: number, operation: RuntimeMethod) => void) | undefined;
}

/**
 * Wraps `base` so that calls and log streams fail as `options` and its seed say. `reap` and
 * `close` pass through untouched: they belong to the worker, not to a build.
 */
export function faultRuntime(base: Runtime, options: FaultOptions): FaultyRuntime {
  const injected: InjectedFault[] = [];
  const seen = new Map<string, number>();
  const openStreams = new Set<PassThrough>();
  const streamFaults = options.streamFaults ?? ['stall', 'shred', 'end-early', 'error'];
  let calls = 0;
  let outageStarted = false;

  const inOutage = (n: number): boolean => options.outage !== undefined && n >= options.outage.at && n < options.outage.at + options.outage.calls;
  const unavailable = (operation: string, subject: string, detail: string): RuntimeError =>
    new RuntimeError('Unavailable', `the engine is unreachable (${detail})`, { runtime: base.name, operation, subject });

  const state: FaultyRuntime = {
    runtime: undefined as unknown as Runtime,
    injected,
    get calls() {
      return calls;
    },
    onCall: undefined,
  };

  const wrapStream = (ctx: Context, source: Readable, rand: () => number, n: number, subject: string): Readable => {
    const fault = rand() < (options.streamRate ?? 0) ? streamFaults[Math.floor(rand() * streamFaults.length)] : undefined;
    const out = new PassThrough();
    openStreams.add(out);
    if (fault !== undefined) injected.push({ call: n, operation: 'tailContainer', subject, kind: `stream:${fault}` });
    const stallAfter = Math.floor(rand() * 256);
    const stallMs = 20 + Math.floor(rand() * (options.maxStallMs ?? 300));
    const cutAfter = Math.floor(rand() * 200);
    const failAfter = Math.floor(rand() * 200);
    let bytes = 0;
    let finished = false;
    let stopCtx = (): boolean => false;
    const finish = (error?: Error): void => {
      if (finished) return;
      finished = true;
      stopCtx();
      openStreams.delete(out);
      source.destroy();
      if (error === undefined) out.end();
      else out.destroy(error);
    };
    out.on('close', () => finish());
    if (ctx.signal.aborted) {
      finish(ctxError(ctx, base.name, 'tailContainer', subject));
      return out;
    }
    stopCtx = afterFunc(ctx, () => finish(ctxError(ctx, base.name, 'tailContainer', subject)));
    const pump = async (): Promise<void> => {
      let stalled = false;
      try {
        for await (const chunk of source) {
          if (finished) return;
          let data = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string);
          if (fault === 'end-early' && bytes + data.length > cutAfter) {
            data = data.subarray(0, Math.max(0, cutAfter - bytes));
            if (data.length > 0 && !out.write(data)) await new Promise((resolve) => out.once('drain', resolve));
            finish();
            return;
          }
          if (fault === 'error' && bytes + data.length > failAfter) {
            finish(unavailable('tailContainer', subject, 'the log stream broke'));
            return;
          }
          if (fault === 'stall' && !stalled && bytes + data.length > stallAfter) {
            stalled = true;
            await sleep(ctx, stallMs);
          }
          const pieces: Buffer[] = [];
          if (fault === 'shred') {
            for (let i = 0; i < data.length;) {
              const size = 1 + Math.floor(rand() * 7);
              pieces.push(data.subarray(i, i + size));
              i += size;
            }
          } else {
            pieces.push(data);
          }
          for (const piece of pieces) {
            if (finished) return;
            if (!out.write(piece)) await new Promise((resolve) => out.once('drain', resolve));
          }
          bytes += data.length;
        }
        // never-end: everything was delivered; the stream stays open until its ctx ends.
        if (fault !== 'never-end') finish();
      } catch (error) {
        finish(ctx.signal.aborted ? ctxError(ctx, base.name, 'tailContainer', subject) : (error as Error));
      }
    };
    void pump();
    return out;
  };

  const runtime = new Proxy(base, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      const fn = value as (...args: unknown[]) => Promise<unknown>;
      const operation = prop as RuntimeMethod;
      if (operation === 'reap' || operation === 'close') return fn.bind(target);
      return async (ctx: Context, ...args: unknown[]): Promise<unknown> => {
        const n = calls++;
        state.onCall?.(n, operation);
        const subject = subjectOf(args);
        const key = `${operation}|${subject}`;
        const nth = seen.get(key) ?? 0;
        seen.set(key, nth + 1);
        const rand = prng(hash(`${options.seed}|${key}|${nth}`));
        const cleanup = CLEANUP_CALLS.has(operation);
        if (inOutage(n) && (options.cleanupErrors === true || !cleanup)) {
          if (!outageStarted) {
            outageStarted = true;
            for (const stream of openStreams) stream.destroy(unavailable('tailContainer', '', 'the engine went away'));
          }
          injected.push({ call: n, operation, subject, kind: 'outage' });
          throw unavailable(operation, subject, 'outage injected by the soak');
        }
        if (rand() < (options.delayRate ?? 0)) {
          const ms = Math.floor(rand() * (options.maxDelayMs ?? 200));
          injected.push({ call: n, operation, subject, kind: 'delay', detail: `${ms}ms` });
          try {
            await sleep(ctx, ms);
          } catch {
            throw ctxError(ctx, base.name, operation, subject);
          }
        }
        const mayFail = options.cleanupErrors === true || !cleanup;
        if (mayFail && rand() < (options.errorRate ?? 0)) {
          const codes = ERROR_CODES[operation] ?? ['Unavailable', 'Internal'];
          const code = codes[Math.floor(rand() * codes.length)] as RuntimeErrorCode;
          injected.push({ call: n, operation, subject, kind: 'error', detail: code });
          throw new RuntimeError(code, `fault injected by the soak (${code})`, { runtime: base.name, operation, subject });
        }
        const lost = mayFail && operation !== 'tailContainer' && rand() < (options.lostReplyRate ?? 0);
        const result = await fn.call(target, ctx, ...args);
        if (lost) {
          injected.push({ call: n, operation, subject, kind: 'lost-reply' });
          throw unavailable(operation, subject, 'the reply was lost');
        }
        if (operation === 'tailContainer') return wrapStream(ctx, result as Readable, rand, n, subject);
        return result;
      };
    },
  });
  (state as { runtime: Runtime }).runtime = runtime;
  return state;
}
