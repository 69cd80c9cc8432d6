import { background, type Context } from '@berth/context';
import { emptyContainer } from '@berth/pipeline';
import type { Runtime } from '@berth/runtime';
import { describe, expect, it } from 'vitest';
import { type DestroyedRun, removeBuildResources, removeContainerOf } from './destroy.ts';

/** A runtime that records the destroy calls, in order; `fail` names calls that reject. */
function recordingRuntime(fail: string[] = [], inspect: { state: string; exitCode?: number } = { state: 'running' }): { runtime: Runtime; calls: string[] } {
  const calls: string[] = [];
  const call = (name: string) => (): Promise<unknown> => {
    calls.push(name);
    if (fail.includes(name)) return Promise.reject(new Error(`${name} failed`));
    return Promise.resolve(name === 'inspectContainer' ? inspect : undefined);
  };
  const runtime = {
    name: 'recording',
    removeContainer: call('removeContainer'),
    inspectContainer: call('inspectContainer'),
    removeVolume: call('removeVolume'),
    removeNetwork: call('removeNetwork'),
    removeBuild: call('removeBuild'),
  } as unknown as Runtime;
  return { runtime, calls };
}

function run(fields: Partial<DestroyedRun>): DestroyedRun {
  return {
    kind: 'step',
    container: emptyContainer({ id: 'step_a', name: 'a' }),
    status: 'success',
    setup: 'created',
    setupAsked: true,
    ran: true,
    exited: false,
    exitCode: 0,
    ...fields,
  };
}

describe('removeContainerOf (go-vela/worker executor/linux/step.go DestroyStep)', () => {
  it('an ended container: its log is read first, then it is removed', async () => {
    const { runtime, calls } = recordingRuntime();
    await removeContainerOf(background(), run({ exited: true }), () => Promise.resolve(void calls.push('waitForStream')), {
      runtime,
      budgetMs: 1_000,
      logger: {},
    });
    expect(calls).toEqual(['waitForStream', 'removeContainer']);
  });

  it('a running container is inspected and removed before its stream is waited for (removing ends it)', async () => {
    const { runtime, calls } = recordingRuntime([], { state: 'exited', exitCode: 3 });
    const r = run({ status: 'running' });
    await removeContainerOf(background(), r, () => Promise.resolve(void calls.push('waitForStream')), { runtime, budgetMs: 1_000, logger: {} });
    expect(calls).toEqual(['inspectContainer', 'removeContainer', 'waitForStream']);
    expect(r).toMatchObject({ exited: true, exitCode: 3 });
  });

  it('a container that never ran is only removed, also when its setup failed (it may exist); one never asked for is left alone', async () => {
    const { runtime, calls } = recordingRuntime();
    const wait = (): Promise<void> => Promise.resolve(void calls.push('waitForStream'));
    await removeContainerOf(background(), run({ ran: false }), wait, { runtime, budgetMs: 1_000, logger: {} });
    await removeContainerOf(background(), run({ ran: false, setup: 'none' }), wait, { runtime, budgetMs: 1_000, logger: {} });
    await removeContainerOf(background(), run({ ran: false, setup: 'none', setupAsked: false }), wait, { runtime, budgetMs: 1_000, logger: {} });
    expect(calls).toEqual(['removeContainer', 'removeContainer']);
  });

  it('each wait gets its own budget: a stream that never ends is cut by the budget and removal still runs', async () => {
    const { runtime, calls } = recordingRuntime();
    const budgets: Context[] = [];
    const never = (budget: Context): Promise<void> => {
      budgets.push(budget);
      return new Promise((resolve) => budget.signal.addEventListener('abort', () => resolve(), { once: true }));
    };
    await removeContainerOf(background(), run({ exited: true }), never, { runtime, budgetMs: 50, logger: {} });
    expect(budgets).toHaveLength(1);
    expect(budgets[0]?.signal.aborted).toBe(true);
    expect(calls).toEqual(['removeContainer']);
  });
});

describe('removeBuildResources (go-vela/worker executor/linux/build.go DestroyBuild)', () => {
  it('removes volume, network and build in order; a failure is warned about and the next still runs', async () => {
    const { runtime, calls } = recordingRuntime(['removeVolume']);
    const warnings: string[] = [];
    await removeBuildResources(background(), { id: 'b1' } as never, { runtime, budgetMs: 1_000, logger: { warn: (m) => warnings.push(m) } });
    expect(calls).toEqual(['removeVolume', 'removeNetwork', 'removeBuild']);
    expect(warnings).toEqual(['destroy b1: removing the volume: removeVolume failed']);
  });
});
