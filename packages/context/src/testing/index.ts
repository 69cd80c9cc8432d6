import { createHook } from 'node:async_hooks';
import { getEventListeners } from 'node:events';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach } from 'vitest';

/** Async resource types checked by default (see `TrackOptions.types`). */
export const DEFAULT_RESOURCE_TYPES: readonly string[] = [
  'Timeout',
  'Immediate',
  'TCPWRAP',
  'TCPSERVERWRAP',
  'TCPCONNECTWRAP',
  'PIPEWRAP',
  'PIPESERVERWRAP',
  'PIPECONNECTWRAP',
  'TLSWRAP',
  'UDPWRAP',
  'HTTPCLIENTREQUEST',
  'HTTPINCOMINGMESSAGE',
  'FSREQCALLBACK',
  'FSREQPROMISE',
  'FILEHANDLE',
  'FSEVENTWRAP',
  'STATWATCHER',
  'GETADDRINFOREQWRAP',
  'GETNAMEINFOREQWRAP',
  'QUERYWRAP',
  'PROCESSWRAP',
  'SIGNALWRAP',
  'WORKER',
  'MESSAGEPORT',
  'ZLIB',
];

/** Frames inside Node itself (`node:timers`, `node:internal/...`). */
const NODE_FRAME = /\(node:|^at node:/;
/** This module's path, to drop the hook's own frame. */
const OWN_FILE = fileURLToPath(import.meta.url);

/** Resources whose creating frame is in the test runner are never reported. */
const RUNNER_FRAMES = /[\\/](?:@vitest|vitest|tinypool|tinyspy|birpc)[\\/]/;

/** Options for `trackAsyncResources` and the helpers built on it. */
export interface TrackOptions {
  /** Resource types to check. Default: `DEFAULT_RESOURCE_TYPES` (no `PROMISE`: too noisy). */
  types?: readonly string[];
  /** Resource types to leave out of the check, e.g. `['Immediate']`. */
  ignore?: readonly string[];
  /** Also skip resources whose creation stack matches one of these. Resources created by the test runner are always skipped. */
  ignoreStacks?: readonly RegExp[];
  /** Treat unref'd timers as harmless. Default: false (a leaked unref'd interval still runs forever). */
  allowUnrefTimers?: boolean;
  /** How long `stop()` waits for resources to be destroyed before judging. Default: 150 ms. */
  settleMs?: number;
  /** Stack frames kept per resource. Default: 5. */
  frames?: number;
}

/** One async resource still alive when tracking stopped. */
export interface LiveResource {
  readonly asyncId: number;
  readonly type: string;
  /** The first user frames of the stack that created it. */
  readonly stack: readonly string[];
  /** For timers: whether it keeps the event loop alive. */
  readonly ref?: boolean;
}

/** What `stop()` found. */
export interface LeakReport {
  /** True when nothing tracked is still alive. */
  readonly ok: boolean;
  readonly live: readonly LiveResource[];
  /** Count of live resources per type. */
  readonly byType: Readonly<Record<string, number>>;
  /** A readable, multi-line summary (empty when `ok`). */
  format(): string;
}

/** A running tracker: stop it to get the report. */
export interface AsyncResourceTracker {
  /** Waits for the settle period, stops tracking and reports what is still alive. */
  stop(): Promise<LeakReport>;
}

interface Entry {
  type: string;
  stack: string;
  resource: object | undefined;
}

function isDestroyed(resource: object | undefined): boolean {
  return resource !== undefined && (resource as { _destroyed?: unknown })._destroyed === true;
}

function timerRef(entry: Entry): boolean | undefined {
  const resource = entry.resource as { hasRef?: () => boolean } | undefined;
  return entry.type === 'Timeout' && typeof resource?.hasRef === 'function' ? resource.hasRef() : undefined;
}

function userFrames(stack: string): string[] {
  return stack
    .split('\n')
    .slice(1)
    .map((line) => line.trim())
    .filter((line) => !NODE_FRAME.test(line) && !line.includes(OWN_FILE) && !line.startsWith('at AsyncHook.init'));
}

function trimStack(stack: string, frames: number): string[] {
  return userFrames(stack)
    .filter((line) => !RUNNER_FRAMES.test(line) && line !== 'at new Promise (<anonymous>)')
    .slice(0, frames);
}

/**
 * Starts recording async resources (timers, sockets, servers, fs requests…) created from now on,
 * with their creation stacks, and forgetting those destroyed. `stop()` reports the rest.
 *
 * Gotchas: tracking is process-wide, so concurrent tests (`test.concurrent`) see each other's
 * resources. Capturing a stack per resource is slow: keep tracked sections short.
 */
export function trackAsyncResources(options: TrackOptions = {}): AsyncResourceTracker {
  const ignore = new Set(options.ignore ?? []);
  const types = new Set((options.types ?? DEFAULT_RESOURCE_TYPES).filter((t) => !ignore.has(t)));
  const ignoreStacks = options.ignoreStacks ?? [];
  const settleMs = options.settleMs ?? 150;
  const frames = options.frames ?? 5;
  const live = new Map<number, Entry>();
  let internal = false;

  const hook = createHook({
    init(asyncId, type, _triggerAsyncId, resource) {
      if (internal || !types.has(type)) return;
      const limit = Error.stackTraceLimit;
      Error.stackTraceLimit = 40;
      const stack = new Error().stack ?? '';
      Error.stackTraceLimit = limit;
      // Judge by the frame that created the resource: every stack in a test has runner frames below.
      const creator = userFrames(stack)[0] ?? '';
      if (RUNNER_FRAMES.test(creator) || ignoreStacks.some((re) => re.test(stack))) return;
      // Keep timer objects to check `_destroyed`/`hasRef()`; other handles are judged by `destroy`.
      live.set(asyncId, { type, stack, resource: type === 'Timeout' || type === 'Immediate' ? resource : undefined });
    },
    destroy(asyncId) {
      live.delete(asyncId);
    },
  });
  hook.enable();

  const stillLive = (): Entry[] =>
    [...live.entries()]
      .filter(([id, e]) => {
        if (isDestroyed(e.resource)) {
          live.delete(id);
          return false;
        }
        return !(options.allowUnrefTimers && timerRef(e) === false);
      })
      .map(([, e]) => e);

  const tick = (): Promise<void> => {
    internal = true;
    try {
      return new Promise((resolve) => setImmediate(resolve));
    } finally {
      internal = false;
    }
  };
  const pause = (ms: number): Promise<void> => {
    internal = true;
    try {
      return new Promise((resolve) => setTimeout(resolve, ms));
    } finally {
      internal = false;
    }
  };

  return {
    async stop(): Promise<LeakReport> {
      for (let i = 0; i < 3; i++) await tick();
      const until = Date.now() + settleMs;
      while (stillLive().length > 0 && Date.now() < until) await pause(10);
      hook.disable();
      const entries = [...live.entries()]
        .filter(([, e]) => !isDestroyed(e.resource) && !(options.allowUnrefTimers && timerRef(e) === false))
        .map(([asyncId, e]): LiveResource => {
          const ref = timerRef(e);
          return { asyncId, type: e.type, stack: trimStack(e.stack, frames), ...(ref === undefined ? {} : { ref }) };
        });
      live.clear();
      return makeReport(entries);
    },
  };
}

function makeReport(live: LiveResource[]): LeakReport {
  const byType: Record<string, number> = {};
  for (const r of live) byType[r.type] = (byType[r.type] ?? 0) + 1;
  return {
    ok: live.length === 0,
    live,
    byType,
    format() {
      if (live.length === 0) return '';
      const lines = [
        `${live.length} async resource(s) still alive: ${Object.entries(byType)
          .map(([t, n]) => `${t}×${n}`)
          .join(', ')}`,
      ];
      for (const r of live) {
        lines.push(`- ${r.type}${r.ref === false ? ' (unref)' : ''} #${r.asyncId}`);
        for (const frame of r.stack) lines.push(`    ${frame}`);
      }
      return lines.join('\n');
    },
  };
}

/** Thrown by `expectNoAsyncLeaks` and `useAsyncLeakCheck`; carries the report. */
export class AsyncLeakError extends Error {
  readonly report: LeakReport;
  constructor(report: LeakReport) {
    super(report.format());
    this.name = 'AsyncLeakError';
    this.report = report;
  }
}

/**
 * Runs `fn` while tracking async resources; throws `AsyncLeakError` (after `fn` settled) when any
 * created during it is still alive. `fn`'s own error wins over a leak report.
 */
export async function expectNoAsyncLeaks(fn: () => unknown, options?: TrackOptions): Promise<void> {
  const tracker = trackAsyncResources(options);
  let report: LeakReport;
  try {
    await fn();
  } finally {
    report = await tracker.stop();
  }
  if (!report.ok) throw new AsyncLeakError(report);
}

/**
 * Registers vitest `beforeEach`/`afterEach` hooks that fail each test in the current file (or
 * `describe`) whose async resources outlive it. Call it at the top of a test file or describe block.
 *
 * Gotcha: resources a test leaves for later tests (e.g. a server closed in `afterAll`) count as
 * leaks; create them in `beforeAll` or pass `ignore`.
 */
export function useAsyncLeakCheck(options?: TrackOptions): void {
  let tracker: AsyncResourceTracker | undefined;
  beforeEach(() => {
    tracker = trackAsyncResources(options);
  });
  afterEach(async () => {
    const current = tracker;
    tracker = undefined;
    if (!current) return;
    const report = await current.stop();
    if (!report.ok) throw new AsyncLeakError(report);
  });
}

/**
 * Number of `abort` listeners currently on `signal` (`events.getEventListeners`): compare before and
 * after to catch contexts that were never cancelled, or waiters that never removed themselves.
 */
export function listenerCount(signal: AbortSignal): number {
  return getEventListeners(signal, 'abort').length;
}
