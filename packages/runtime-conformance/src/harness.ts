import { background, sleep, withTimeout, type Context } from '@berth/context';
import type { Build } from '@berth/pipeline';
import { isRuntimeError, type Runtime, type RuntimeConfig, type RuntimeErrorCode } from '@berth/runtime';
import { uniqueSuffix } from './builders.ts';
import type { ConformanceFactory, ResolvedConformanceOptions } from './options.ts';
import type { Preflight } from './preflight.ts';

/**
 * What one conformance case works with: runtimes created through the factory (each with a fresh
 * worker id unless given one), the builds to clean up, and bounded contexts. {@link CaseHarness.dispose}
 * removes every tracked build, reaps every worker id used, and closes every runtime.
 */
export class CaseHarness {
  readonly options: ResolvedConformanceOptions;
  readonly #preflight: Preflight | undefined;
  readonly #factory: ConformanceFactory;
  readonly #runtimes: Runtime[] = [];
  readonly #builds: { runtime: Runtime; build: Build }[] = [];
  readonly #workerIds = new Set<string>();
  readonly #cancels: (() => void)[] = [];
  readonly #workerOf = new WeakMap<Runtime, string>();

  constructor(factory: ConformanceFactory, options: ResolvedConformanceOptions, preflight?: Preflight) {
    this.#factory = factory;
    this.options = options;
    this.#preflight = preflight;
  }

  /** The suite's preflight (only the preflight cases use it). */
  get preflight(): Preflight {
    if (!this.#preflight) throw new Error('[berth] conformance: this harness was created without a preflight');
    return this.#preflight;
  }

  /** A fresh worker id: `conformance-<random>`. */
  newWorkerId(): string {
    return `conformance-${uniqueSuffix()}`;
  }

  /** Creates a runtime with the suite's config, then `config`; the worker id is fresh unless given. */
  async runtime(config: Partial<RuntimeConfig> = {}): Promise<Runtime> {
    const full: RuntimeConfig = { ...this.options.config, ...config, workerId: config.workerId ?? this.newWorkerId() };
    this.#workerIds.add(full.workerId);
    const runtime = await this.#factory(full);
    this.#runtimes.push(runtime);
    this.#workerOf.set(runtime, full.workerId);
    return runtime;
  }

  /** The worker id `runtime` was created with (by {@link CaseHarness.runtime}). */
  workerIdOf(runtime: Runtime): string {
    const workerId = this.#workerOf.get(runtime);
    if (workerId === undefined) throw new Error('[berth] conformance: this runtime was not created by the harness');
    return workerId;
  }

  /** Remembers `build` for removal through `runtime` when the case ends. */
  track(runtime: Runtime, build: Build): Build {
    this.#builds.push({ runtime, build });
    return build;
  }

  /** A ctx that ends after `ms` (default: the case bound); cancelled when the case ends. */
  ctx(ms = this.options.timeouts.case): Context {
    const [ctx, cancel] = withTimeout(background(), ms);
    this.#cancels.push(cancel);
    return ctx;
  }

  /** Removes tracked builds, reaps the worker ids used and closes the runtimes. Never rejects. */
  async dispose(): Promise<void> {
    const ctx = this.ctx(30_000);
    for (const { runtime, build } of this.#builds.reverse()) {
      await runtime.removeBuild(ctx, build).catch(() => undefined);
    }
    const reaper = this.#runtimes.at(-1);
    if (reaper) {
      for (const workerId of this.#workerIds) await reaper.reap(ctx, workerId).catch(() => undefined);
    }
    for (const runtime of this.#runtimes) await runtime.close().catch(() => undefined);
    for (const cancel of this.#cancels) cancel();
  }
}

/** How a promise settled, and after how many milliseconds. */
export type Settlement<T> =
  { status: 'fulfilled'; value: T; ms: number } | { status: 'rejected'; reason: unknown; ms: number } | { status: 'pending'; ms: number };

/**
 * Waits for `promise` at most `limitMs`, never rejecting: tells how it settled and when. Lets a
 * case assert on a runtime that hangs without hanging itself.
 */
export async function settleWithin<T>(promise: Promise<T>, limitMs: number, startedAt = performance.now()): Promise<Settlement<T>> {
  const [ctx, cancel] = withTimeout(background(), limitMs);
  try {
    const outcome = await Promise.race([
      promise.then(
        (value) => ({ status: 'fulfilled' as const, value }),
        (reason: unknown) => ({ status: 'rejected' as const, reason }),
      ),
      ctx.done().then(() => ({ status: 'pending' as const })),
    ]);
    return { ...outcome, ms: performance.now() - startedAt };
  } finally {
    cancel();
  }
}

/** A one-line description of a settlement or error, for assertion messages. */
export function describeOutcome(outcome: Settlement<unknown>): string {
  const ms = `${Math.round(outcome.ms)} ms`;
  if (outcome.status === 'pending') return `still pending after ${ms}`;
  if (outcome.status === 'fulfilled') return `resolved after ${ms} with ${safeJson(outcome.value)}`;
  return `rejected after ${ms} with ${describeError(outcome.reason)}`;
}

/** `RuntimeError(code): message`, or the error's name and message. */
export function describeError(error: unknown): string {
  if (isRuntimeError(error)) return `RuntimeError(${error.code}): ${error.message}`;
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return safeJson(error);
}

/** True when `outcome` rejected with a `RuntimeError` of one of `codes`. */
export function rejectedWith(outcome: Settlement<unknown>, ...codes: RuntimeErrorCode[]): boolean {
  return outcome.status === 'rejected' && isRuntimeError(outcome.reason, ...codes);
}

/** Polls `runtime.inspectContainer` until `predicate` holds or `limitMs` passes; returns whether it held. */
export async function pollUntil(check: () => Promise<boolean>, limitMs: number, intervalMs = 50): Promise<boolean> {
  const [ctx, cancel] = withTimeout(background(), limitMs);
  try {
    for (;;) {
      if (await check().catch(() => false)) return true;
      await sleep(ctx, intervalMs);
    }
  } catch {
    return false;
  } finally {
    cancel();
  }
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
