/**
 * @berth/runtime-conformance/runner: the conformance suite without vitest, for a command that
 * certifies a plugin (`berth runtimes verify`). The same cases, skips and preflight as
 * `runtimeConformance`; each case's outcome is returned (and reported as it ends) instead of
 * being declared as a test.
 *
 * @packageDocumentation
 */
import { background, withTimeout } from '@berth/runtime';
import { conformanceCases } from './cases.ts';
import { CaseSkipped, type ConformanceCase } from './cases/shared.ts';
import { CaseHarness, describeError } from './harness.ts';
import { resolveConformanceOptions, type ConformanceOptions } from './options.ts';
import { requirementOf, staticSkip, targetOf, type ConformanceTarget } from './plan.ts';
import { Preflight } from './preflight.ts';

export type { ConformanceTarget } from './plan.ts';
export type { ConformanceCapability, ConformanceFactory, ConformanceOptions, ConformanceTimeouts } from './options.ts';

/** The outcome of one case. */
export interface CaseResult {
  group: string;
  name: string;
  /** `required`, or `optional: <capability>` for a case of an optional contract capability. */
  requirement: string;
  status: 'passed' | 'failed' | 'skipped';
  /** Why it failed or was skipped. */
  reason?: string;
  /** How long it ran, in milliseconds (0 when skipped before it started). */
  ms: number;
}

/** Every case's outcome; `passed` when none failed. */
export interface ConformanceReport {
  results: CaseResult[];
  passed: boolean;
}

/** Options of {@link verifyConformance}: the suite's, and a callback for each case as it ends. */
export interface VerifyOptions extends ConformanceOptions {
  /** Called with each case's outcome as soon as it is known (for a live table). */
  onResult?: (result: CaseResult) => void;
  /** Runs only the cases whose name or group includes this text (or one of these). */
  filter?: string | readonly string[];
}

/**
 * Runs every conformance case against `target` (a plugin's descriptor or a factory of runtimes),
 * one after another, each bounded by the case timeout, and resolves their outcomes. Never rejects
 * for a failing runtime: a failure is a result. A case of an optional capability the plugin
 * declared counts as any other (the worker will use it).
 */
export async function verifyConformance(target: ConformanceTarget, options: VerifyOptions = {}): Promise<ConformanceReport> {
  const { onResult, filter, ...suiteOptions } = options;
  const { factory, options: given } = targetOf(target, suiteOptions);
  const resolved = resolveConformanceOptions(given);
  const all = conformanceCases();
  const preflight = new Preflight(factory, resolved, all);
  const results: CaseResult[] = [];
  const report = (result: CaseResult) => {
    results.push(result);
    onResult?.(result);
  };
  const texts = filter === undefined ? undefined : typeof filter === 'string' ? [filter] : filter;
  for (const testCase of all.filter((c) => texts === undefined || texts.some((t) => c.name.includes(t) || c.group.includes(t)))) {
    const base = { group: testCase.group, name: testCase.name, requirement: requirementOf(testCase) };
    const skipped = staticSkip(testCase, resolved) ?? (await preflight.skipReason(testCase));
    if (skipped !== undefined) {
      report({ ...base, status: 'skipped', reason: skipped, ms: 0 });
      continue;
    }
    const started = performance.now();
    const outcome = await runCase(testCase, new CaseHarness(factory, resolved, preflight), resolved.timeouts.case * (testCase.timeoutFactor ?? 1));
    report({ ...base, ...outcome, ms: Math.round(performance.now() - started) });
  }
  return { results, passed: results.every((r) => r.status !== 'failed') };
}

/** Runs one case within `limitMs`, then disposes of its harness. */
async function runCase(testCase: ConformanceCase, harness: CaseHarness, limitMs: number): Promise<Pick<CaseResult, 'status' | 'reason'>> {
  const [ctx, cancel] = withTimeout(background(), limitMs);
  try {
    const ran = testCase.run(harness).then(
      () => ({ status: 'passed' as const }),
      (error: unknown) =>
        error instanceof CaseSkipped ? { status: 'skipped' as const, reason: error.message } : { status: 'failed' as const, reason: describeError(error) },
    );
    const timedOut = ctx.done().then(() => ({ status: 'failed' as const, reason: `did not finish within ${Math.round(limitMs / 1000)} s` }));
    return await Promise.race([ran, timedOut]);
  } finally {
    cancel();
    await harness.dispose();
  }
}
