/**
 * The seeded fault soak with a fixed seed, in the package's test command: 60 builds on the dummy, each checked against issue #13's invariants. `pnpm --filter @berth/executor
 * soak` runs it with more builds and any seed. Also: proofs that each invariant can fail.
 */
import { background } from '@berth/context';
import type { Runtime } from '@berth/runtime';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ctn, makeBuild, RecordingReporter } from '../helpers.ts';
import { checkSecrets, checkStatuses } from './invariants.ts';
import { secretForms } from './pipeline.ts';
import { soak, type SoakTarget } from './soak.ts';
import { dummyTarget } from './targets.ts';

/** The fixed seed of the test command (any seed must pass; this one is replayed in CI). */
const SEED = 20261203;

describe('the soak, fixed seed', () => {
  it('60 builds on the dummy runtime: no invariant broken', { timeout: 180_000 }, async () => {
    const target = await dummyTarget();
    try {
      const result = await soak(target, { seed: SEED, n: 60, knownBugs: true, print: (line) => console.log(line) });
      console.log(result.summary);
      expect(result.violations.map((v) => v.message)).toEqual([]);
      // The seed covers what the soak is for: cancels, timeouts, failures and faults of every kind.
      expect(result.endAfterCancel.length).toBeGreaterThan(5);
      expect(Object.keys(result.statuses).sort()).toEqual(['canceled', 'error', 'failure', 'success']);
      expect(Object.keys(result.faults)).toEqual(
        expect.arrayContaining(['delay', 'error', 'stream:stall', 'stream:shred', 'stream:end-early', 'stream:error']),
      );
    } finally {
      await target.close();
    }
  });
});

describe('the soak can fail', () => {
  let target: SoakTarget & { close(): Promise<void> };
  beforeAll(async () => {
    target = await dummyTarget();
  });
  afterAll(async () => {
    await target.close();
  });

  it('a runtime that forgets to remove networks is caught by reap', async () => {
    const leaky: Runtime = new Proxy(target.runtime, {
      get(base, prop) {
        if (prop === 'removeNetwork' || prop === 'removeBuild') return () => Promise.resolve();
        const value: unknown = Reflect.get(base, prop, base);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(base) : value;
      },
    });
    const result = await soak({ ...target, runtime: leaky }, { seed: 1, n: 2, knownBugs: false });
    expect(result.violations.some((v) => v.message.startsWith('left behind (reap removed them): '))).toBe(true);
    await target.runtime.reap(background(), target.workerId);
  });

  it('a secret form in a log or an error is caught', () => {
    const reporter = new RecordingReporter();
    reporter.chunks.set('a', [Buffer.from('x ml-one ml-two y')]);
    const found = checkSecrets(
      ['ml-one\nml-two\n'],
      reporter,
      { build: { id: 'b', status: 'error', runtime: 'dummy', host: 'h', distribution: 'linux', error: 'oops ml-one\\nml-two' } },
      [],
    );
    expect(found).toEqual(expect.arrayContaining(['secret form "ml-one ml-two" in the log of a', 'secret form "ml-one\\\\nml-two" in the build error']));
    expect(secretForms('ab\ncdef\r\n')).toEqual(expect.arrayContaining(['ab\ncdef\r\n', 'ab\ncdef', 'ab cdef', 'ab\r\ncdef', 'ab\\ncdef', 'cdef']));
    expect(secretForms('ab\ncdef\r\n')).not.toContain('ab');
  });

  it('two final statuses, or a build status against the rules, are caught', () => {
    const build = makeBuild({ steps: [ctn('one')] });
    const reporter = new RecordingReporter();
    const step = { kind: 'step' as const, name: 'one', number: 2, id: 'x', image: 'i', exitCode: 1, detached: false, continueOnFailure: false };
    reporter.steps.push({ ...step, name: 'init', kind: 'init', status: 'success', exitCode: 0 }, { ...step, status: 'failure' }, { ...step, status: 'error' });
    const report = { id: build.id, status: 'success' as const, runtime: 'dummy', host: 'h', distribution: 'linux' };
    reporter.builds.push(report);
    const found = checkStatuses(build, reporter, { status: 'success', build: report }, false);
    expect(found).toEqual(expect.arrayContaining(['one: 2 final statuses (failure → error), want exactly one', 'build success but one is error']));
  });
});
