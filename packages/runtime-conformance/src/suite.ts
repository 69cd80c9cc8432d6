import { describe, it } from 'vitest';
import { conformanceCases } from './cases.ts';
import { CaseSkipped } from './cases/shared.ts';
import { CaseHarness } from './harness.ts';
import { resolveConformanceOptions, type ConformanceOptions } from './options.ts';
import { staticSkip, targetOf, type ConformanceTarget } from './plan.ts';
import { Preflight } from './preflight.ts';

/**
 * Declares the Runtime conformance suite for one plugin, as vitest `describe` blocks: call it at the
 * top level of a test file. `target` is the plugin's descriptor (its declared capabilities decide
 * which optional cases run) or a factory of runtimes. Each case creates fresh runtimes (a fresh
 * worker id each), drives them as the executor does, and removes and reaps what it created, pass or fail.
 *
 * Gotcha: cases whose capability is listed in `options.skip` are reported as skipped with the reason
 * in their name, and so are the cases of an optional capability the plugin does not declare; every
 * other case must pass. The suite needs the `image` option's image present where the runtime runs,
 * and never pulls. Its first two cases are a preflight: when the image lacks a program the scripts
 * call, or a live log stream ends before its container exits, that case fails naming the cause and
 * the cases depending on it are skipped (so the suite stays red, once).
 *
 * @example
 * runtimeConformance('docker', dockerRuntime(), {
 *   skip: { privileged: 'the engine runs rootless' },
 * });
 */
export function runtimeConformance(name: string, target: ConformanceTarget, options: ConformanceOptions = {}): void {
  const { factory, options: given } = targetOf(target, options);
  const resolved = resolveConformanceOptions(given);
  const cases = conformanceCases();
  const preflight = new Preflight(factory, resolved, cases);
  describe(`runtime conformance: ${name}`, () => {
    for (const group of [...new Set(cases.map((c) => c.group))]) {
      describe(group, () => {
        for (const testCase of cases.filter((c) => c.group === group)) {
          const skipped = staticSkip(testCase, resolved);
          if (skipped !== undefined) {
            // The sanctioned skips: a capability the plugin declared it lacks, or an optional one it does not declare.
            it.skip(`${testCase.name} [skipped: ${skipped}]`, () => undefined);
            continue;
          }
          it(
            testCase.name,
            async (context) => {
              // One clear failure in the preflight group rather than many obscure ones: a case that
              // depends on what the preflight found missing is skipped, naming it.
              const why = await preflight.skipReason(testCase);
              if (why !== undefined) context.skip(why);
              const harness = new CaseHarness(factory, resolved, preflight);
              try {
                await testCase.run(harness);
              } catch (error) {
                if (error instanceof CaseSkipped) context.skip(error.message);
                throw error;
              } finally {
                await harness.dispose();
              }
            },
            resolved.timeouts.case * (testCase.timeoutFactor ?? 1),
          );
        }
      });
    }
  });
}
