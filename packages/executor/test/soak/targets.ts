/**
 * The runtimes a soak runs on, with budgets sized to each: the dummy (fast, in memory) and the
 * local Docker engine (real containers; never a pull).
 */
import { background } from '@berth/context';
import { DummyEngine, dummyRuntime } from '@berth/runtime-dummy';
import { dockerRuntime } from '@berth/runtime-docker';
import type { SoakTarget } from './soak.ts';

/** A dummy runtime on its own engine. */
export async function dummyTarget(): Promise<SoakTarget & { close(): Promise<void> }> {
  const workerId = `soak-dummy-${process.pid}`;
  const runtime = await dummyRuntime({ engine: new DummyEngine() }).create(background(), { workerId });
  return {
    name: 'dummy',
    runtime,
    workerId,
    slackMs: 1_500,
    budgets: { timeoutMs: [300, 2_500], graceMs: [20, 300], cleanupMs: [300, 1_500] },
    trackResources: true,
    pipeline: { multiline: process.env.SOAK_MULTILINE !== '0', slowSeconds: 3, maxContainers: 8, slowRate: 0.2 },
    close: () => runtime.close(),
  };
}

/** The local Docker engine, with a short stop grace. */
export async function dockerTarget(): Promise<SoakTarget & { close(): Promise<void> }> {
  const workerId = `soak-docker-${process.pid}`;
  const runtime = await dockerRuntime().create(background(), { workerId, stopGraceMs: 500 });
  return {
    name: 'docker',
    runtime,
    workerId,
    // Creating, starting and removing a container takes seconds on a loaded 2-core machine; the
    // contract gives every call about a second to settle after its ctx ends.
    slackMs: 8_000,
    budgets: { timeoutMs: [3_000, 8_000], graceMs: [100, 1_000], cleanupMs: [8_000, 15_000] },
    trackResources: true,
    pipeline: { multiline: process.env.SOAK_MULTILINE !== '0', slowSeconds: 10, maxContainers: 2, slowRate: 0.05 },
    close: async () => {
      await runtime.reap(background(), workerId).catch(() => undefined);
      await runtime.close();
    },
  };
}
