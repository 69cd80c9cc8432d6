import { type Context, errOf, sleep } from '@berth/context';
import { PassThrough } from 'node:stream';
import type { Container } from '@berth/pipeline';
import { type Runtime, RuntimeError } from '@berth/runtime';
import { expect } from 'vitest';

/** The runtime methods a test can slow down. */
export type RuntimeMethod = Exclude<keyof Runtime, 'name' | 'setupWhileRunning'>;

/**
 * Wraps `runtime` so that `method` first waits `ms` (honouring its ctx, as the contract asks),
 * to hold a build in one phase while a test cancels it or lets it time out. `entered` is called
 * as a slowed call starts.
 */
export function slowed(runtime: Runtime, delays: Partial<Record<RuntimeMethod, number>>, entered?: (method: RuntimeMethod) => void): Runtime {
  return new Proxy(runtime, {
    get(target, prop, _receiver) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      const fn = value as (...args: unknown[]) => unknown;
      const delay = delays[prop as RuntimeMethod];
      if (delay === undefined) return fn.bind(target);
      return async (ctx: Context, ...args: unknown[]) => {
        entered?.(prop as RuntimeMethod);
        try {
          await sleep(ctx, delay);
        } catch {
          const err = errOf(ctx);
          throw new RuntimeError(err.name === 'DeadlineExceeded' ? 'DeadlineExceeded' : 'Canceled', 'the context ended', {
            runtime: target.name,
            operation: String(prop),
            cause: err,
          });
        }
        return fn.call(target, ctx, ...args);
      };
    },
  });
}

/**
 * Wraps `runtime` so that every call is recorded in `calls` as it starts: `method name` (the
 * container's name, or the build's id), in order.
 */
export function recorded(runtime: Runtime, calls: string[]): Runtime {
  return new Proxy(runtime, {
    get(target, prop, _receiver) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      const fn = value as (...args: unknown[]) => unknown;
      return (ctx: Context, subject?: { name?: string; id?: string }, ...args: unknown[]) => {
        calls.push(`${String(prop)} ${subject?.name ?? subject?.id ?? ''}`.trim());
        return fn.call(target, ctx, subject, ...args);
      };
    },
  });
}

/** The index of the first call `call` in `calls` ({@link recorded}); fails the test when there is none. */
export function at(calls: readonly string[], call: string): number {
  const i = calls.indexOf(call);
  expect(i, `${call} in ${calls.join(', ')}`).toBeGreaterThanOrEqual(0);
  return i;
}

/**
 * `runtime` without `setupWhileRunning`: the executor sets every container up in assembleBuild,
 * as it does on Kubernetes.
 */
export function setupInAssemble(runtime: Runtime): Runtime {
  return new Proxy(runtime, {
    get(target, prop, _receiver) {
      if (prop === 'setupWhileRunning') return undefined;
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/**
 * `runtime` without the held start (`holdContainer` / `releaseContainer`, contract 1.4): the
 * executor creates each step's container ahead and starts it when the step runs.
 */
export function withoutHeldStart(runtime: Runtime): Runtime {
  return new Proxy(runtime, {
    get(target, prop, _receiver) {
      if (prop === 'holdContainer' || prop === 'releaseContainer') return undefined;
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** A runtime method's call: its ctx, its subject (a container or a build), the rest. */
type Call = (ctx: Context, subject: { name?: string; id?: string }, ...args: unknown[]) => Promise<unknown>;

/**
 * Wraps `runtime` so that `method` is `wrap(original)`, the original bound to the runtime; every
 * other member goes through.
 */
export function intercepted(runtime: Runtime, method: RuntimeMethod, wrap: (original: Call) => Call): Runtime {
  return new Proxy(runtime, {
    get(target, prop, _receiver) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== 'function') return value;
      const fn = (value as Call).bind(target);
      return prop === method ? wrap(fn) : fn;
    },
  });
}

/**
 * Wraps `runtime` so that `method` rejects with `error()` for the containers (or builds) whose
 * name `when` accepts; other calls go through.
 */
export function failing(
  runtime: Runtime,
  method: RuntimeMethod,
  error: () => Error,
  when: (subject: { name?: string; id?: string }) => boolean = () => true,
): Runtime {
  return intercepted(
    runtime,
    method,
    (original) =>
      (ctx, subject, ...args) =>
        when(subject) ? Promise.reject(error()) : original(ctx, subject, ...args),
  );
}

/** Calls `then` once `holdContainer` of the step `name` resolved `true` (the step's container is held). */
export function onHeld(runtime: Runtime, name: string, then: () => void): Runtime {
  return intercepted(runtime, 'holdContainer', (original) => async (ctx, container, ...args) => {
    const held = await original(ctx, container, ...args);
    if (held === true && container.name === name) then();
    return held;
  });
}

/** What {@link stuckStreams} saw: when each container's stream was cut, by name. */
export interface StreamEvents {
  /** Milliseconds (performance.now()) at which the executor destroyed the stream, by container name. */
  readonly cut: Map<string, number>;
}

/**
 * Wraps `runtime` so that the log streams of the containers `when` accepts pass the log on but
 * never end, even after the container did: a log stream that hangs (a stuck engine connection).
 * Only the reader destroying it ends it; `events.cut` records when.
 */
export function stuckStreams(runtime: Runtime, events: StreamEvents, when: (container: { name: string }) => boolean = () => true): Runtime {
  return intercepted(runtime, 'tailContainer', () => async (ctx, subject) => {
    const container = subject as Container;
    const source = await runtime.tailContainer(ctx, container);
    if (!when(container)) return source;
    const stuck = new PassThrough();
    source.on('data', (chunk: Buffer) => stuck.write(chunk));
    source.on('error', () => undefined);
    stuck.on('close', () => {
      events.cut.set(container.name, performance.now());
      source.destroy();
    });
    return stuck;
  });
}
