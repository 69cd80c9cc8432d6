import { background, type RuntimeDescriptor } from '@berth/runtime';
import type { ConformanceCase } from './cases/shared.ts';
import type { ConformanceFactory, ConformanceOptions, ResolvedConformanceOptions } from './options.ts';

/** What the suite runs against: a factory of runtimes, or a plugin's descriptor (its declared capabilities included). */
export type ConformanceTarget = ConformanceFactory | RuntimeDescriptor;

/** The factory and options for a target: a descriptor's `create` with a background ctx, and its `capabilities` unless given. */
export function targetOf(target: ConformanceTarget, options: ConformanceOptions): { factory: ConformanceFactory; options: ConformanceOptions } {
  if (typeof target === 'function') return { factory: target, options };
  return {
    factory: (config) => target.create(background(), config),
    options: { ...options, capabilities: options.capabilities ?? target.capabilities ?? [] },
  };
}

/** Whether a case is required of every plugin, or checks an optional capability. */
export function requirementOf(testCase: ConformanceCase): string {
  return testCase.optional === undefined ? 'required' : `optional: ${testCase.optional}`;
}

/**
 * Why `testCase` does not run for this plugin, decided before any runtime exists: an optional
 * capability it did not declare, or a capability it declared it lacks (`skip`). Undefined when it runs.
 */
export function staticSkip(testCase: ConformanceCase, options: ResolvedConformanceOptions): string | undefined {
  const optional = testCase.optional;
  if (optional !== undefined && options.capabilities !== undefined && !options.capabilities.includes(optional)) {
    return `the plugin does not declare the optional capability ${optional}`;
  }
  // Undeclared (a factory without the option): outputs is probed on the runtime, hostWorkspace cannot be.
  if (optional === 'hostWorkspace' && options.capabilities === undefined) return 'the plugin does not declare the optional capability hostWorkspace';
  for (const capability of testCase.capabilities ?? []) {
    const reason = options.skip[capability];
    if (reason !== undefined) return `lacks ${capability}: ${reason}`;
  }
  return undefined;
}
