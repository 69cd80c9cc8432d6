// The conformance suite run without vitest (@berth/runtime-conformance/runner, what `berth runtimes
// verify` uses): each case's outcome, required or optional, and the optional capabilities' cases
// only for a plugin that declares them.
import { background, defineRuntime, CONTRACT_VERSION } from '@berth/runtime';
import { verifyConformance, type CaseResult } from '@berth/runtime-conformance/runner';
import { describe, expect, it } from 'vitest';
import { dummyRuntime, DummyEngine } from '../src/index.ts';
import { brokenRuntime } from './broken/broken-runtime.ts';

const OUTPUTS_CASE = 'outputs: files steps write to /vela/outputs are shared by the build and read through its containers';
const byName = (results: CaseResult[], name: string) => results.find((r) => r.name === name);

describe('verifyConformance', () => {
  it('passes the dummy, which declares outputs: its outputs case runs as optional, and the undeclared hostWorkspace case is skipped', async () => {
    const seen: string[] = [];
    const report = await verifyConformance(dummyRuntime({ engine: new DummyEngine() }), { largeLogBytes: 4 * 1024 * 1024, onResult: (r) => seen.push(r.name) });
    const failed = report.results.filter((r) => r.status === 'failed');
    expect(failed, JSON.stringify(failed, null, 2)).toEqual([]);
    expect(report.passed).toBe(true);
    expect(seen).toEqual(report.results.map((r) => r.name));
    expect(byName(report.results, OUTPUTS_CASE)).toMatchObject({ requirement: 'optional: outputs', status: 'passed' });
    const hostWorkspace = report.results.find((r) => r.requirement === 'optional: hostWorkspace');
    expect(hostWorkspace).toMatchObject({ status: 'skipped', reason: 'the plugin does not declare the optional capability hostWorkspace' });
    expect(report.results.filter((r) => r.requirement === 'required').every((r) => r.status === 'passed')).toBe(true);
  }, 120_000);

  it('skips the outputs case for a plugin that never declared outputs, even when its runtime has the methods', async () => {
    const inner = dummyRuntime({ engine: new DummyEngine() });
    // A plugin written for contract 1.0: no capabilities field.
    const old = defineRuntime({ name: 'old', version: '1.0.0', contract: '1.0.0', create: (ctx, config) => inner.create(ctx, config) });
    const report = await verifyConformance(old, { filter: 'outputs' });
    expect(report.results).toEqual([
      expect.objectContaining({ name: OUTPUTS_CASE, status: 'skipped', reason: 'the plugin does not declare the optional capability outputs' }),
    ]);
    expect(report.passed).toBe(true);
  });

  it('fails a plugin that declares outputs without offering them, saying so', async () => {
    const inner = dummyRuntime({ engine: new DummyEngine() });
    const liar = defineRuntime({
      name: 'liar',
      version: '1.0.0',
      contract: CONTRACT_VERSION,
      capabilities: ['outputs'],
      create: async (ctx, config) => {
        const runtime = await inner.create(ctx, config);
        return new Proxy(runtime, {
          get: (target, key) => {
            if (key === 'setupOutputs' || key === 'readOutput') return undefined;
            const value: unknown = Reflect.get(target, key, target);
            return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
          },
        });
      },
    });
    const report = await verifyConformance(liar, { filter: 'outputs' });
    expect(report.passed).toBe(false);
    expect(byName(report.results, OUTPUTS_CASE)?.reason).toMatch(/declares the optional outputs capability but its runtime lacks setupOutputs or readOutput/);
  });

  it('reports the failed cases of a broken runtime with the reason, and does not pass it', async () => {
    const descriptor = dummyRuntime({ engine: new DummyEngine() });
    const report = await verifyConformance(async (config) => brokenRuntime(await descriptor.create(background(), config), 'drop-last-line'), {
      filter: 'delivers output',
    });
    expect(report.passed).toBe(false);
    expect(report.results.map((r) => [r.name, r.status])).toEqual([
      ['delivers output without a trailing newline', 'failed'],
      ['delivers output under 5 bytes', 'failed'],
    ]);
    expect(report.results[0]?.reason).toBe("AssertionError: expected 'first\\n' to be 'first\\nno-newline'");
  });
});
