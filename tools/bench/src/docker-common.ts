import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { Context } from '@berth/context';
import { type Build, type Container, emptyBuild, emptyContainer } from '@berth/pipeline';
import type { Runtime } from '@berth/runtime';

/** The local test image (static busybox), built by tools/images/build.sh. */
export const BUSYBOX = process.env.BERTH_BUSYBOX_IMAGE ?? 'berth/busybox:1.35';

/** `execFile` as a promise. */
export const run = promisify(execFile);

/** A random suffix so a benchmark never collides with a test run. */
export function suffix(): string {
  return Math.random().toString(36).slice(2, 10);
}

/** A build with its network and volume, as the executor prepares one. */
export async function prepareBuild(ctx: Context, runtime: Runtime, id: string): Promise<Build> {
  const build = emptyBuild({ id });
  await runtime.setupBuild(ctx, build);
  await runtime.createNetwork(ctx, build);
  await runtime.createVolume(ctx, build);
  return build;
}

/** A step of `build` running `script` with `sh -c`. */
export function shellStep(build: Build, name: string, script: string): Container {
  return emptyContainer({ id: `${build.id}_${name}`, name, image: BUSYBOX, pull: 'not_present', entrypoint: ['/bin/sh', '-c'], commands: [script] });
}

/** Milliseconds since `start` (from `performance.now()`), rounded to 0.1 ms. */
export function since(start: number): number {
  return Math.round((performance.now() - start) * 10) / 10;
}

/** The median of some numbers. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

/**
 * `runtime` without `setupWhileRunning` (contract 1.3): the executor then sets every container up
 * in assembleBuild, as it did before issue 28 and still does on Kubernetes. For before/after figures.
 */
export function setupInAssemble(runtime: Runtime): Runtime {
  return new Proxy(runtime, {
    get(target, prop) {
      if (prop === 'setupWhileRunning') return undefined;
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/**
 * `runtime` without the `heldStart` capability (contract 1.4): the executor then creates each
 * step's container ahead and starts it when the step runs, as before the held start. For
 * before/after figures in one run.
 */
export function withoutHeldStart(runtime: Runtime): Runtime {
  return new Proxy(runtime, {
    get(target, prop) {
      if (prop === 'holdContainer' || prop === 'releaseContainer') return undefined;
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
