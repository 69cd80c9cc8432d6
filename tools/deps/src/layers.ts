/**
 * The layering of ARCHITECTURE.md as data: which workspace packages a package's shipped code
 * may import. Arrows point one way: context ← pipeline ← runtime ← plugins; the executor knows
 * only the contract; only apps know which plugins exist; nothing imports an app.
 */

/** The role a workspace package plays in the layering. */
export type Role = 'context' | 'pipeline' | 'contract' | 'conformance' | 'plugin' | 'test-double' | 'executor' | 'app' | 'tool';

/** Classifies a workspace package by its name and folder. */
export function roleOf(name: string, dir: string): Role {
  if (dir.startsWith('apps/')) return 'app';
  if (dir.startsWith('tools/')) return 'tool';
  switch (name) {
    case '@berth/context':
      return 'context';
    case '@berth/pipeline':
      return 'pipeline';
    case '@berth/runtime':
      return 'contract';
    case '@berth/runtime-conformance':
      return 'conformance';
    case '@berth/runtime-dummy':
      return 'test-double';
    case '@berth/executor':
      return 'executor';
    default:
      return /^@berth\/runtime-/.test(name) ? 'plugin' : 'tool';
  }
}

/** Roles a package's shipped code (src/, not tests) may import. */
const SHIPPED: Record<Role, readonly Role[]> = {
  context: [],
  pipeline: ['context'],
  contract: ['context', 'pipeline'],
  conformance: ['context', 'pipeline', 'contract'],
  plugin: ['context', 'pipeline', 'contract'],
  'test-double': ['context', 'pipeline', 'contract'],
  executor: ['context', 'pipeline', 'contract'],
  // The app runs the conformance suite for `berth runtimes verify` (through its vitest-free runner).
  app: ['context', 'pipeline', 'contract', 'conformance', 'plugin', 'executor'],
  tool: ['context', 'pipeline', 'contract', 'conformance', 'plugin', 'test-double', 'executor', 'tool'],
};

/**
 * Roles a package's tests, benchmarks and config files may import on top of {@link SHIPPED}:
 * test suites, test doubles and test tools. A plugin's tests still never import another plugin.
 */
const TESTS_EXTRA: Record<Role, readonly Role[]> = {
  context: [],
  pipeline: [],
  contract: ['test-double', 'conformance'],
  conformance: ['test-double'],
  plugin: ['conformance', 'test-double', 'tool'],
  'test-double': ['conformance'],
  executor: ['conformance', 'test-double', 'plugin', 'tool'],
  app: ['test-double', 'tool'],
  tool: [],
};

/** Why `from` may not import `to`, or undefined when it may. */
export function layeringViolation(from: { name: string; role: Role }, to: { name: string; role: Role }, inTest: boolean): string | undefined {
  if (from.name === to.name) return undefined;
  if (to.role === 'app') return `nothing may import an app (${to.name}): move the shared code into a package`;
  const allowed = inTest ? [...SHIPPED[from.role], ...TESTS_EXTRA[from.role]] : SHIPPED[from.role];
  if (allowed.includes(to.role)) return undefined;
  if (from.role === 'plugin' && to.role === 'plugin') return `a runtime plugin never imports another plugin (${to.name})`;
  if (from.role === 'executor' && to.role === 'plugin') {
    return `the executor speaks only to the Runtime contract; ${to.name} is a plugin (tests may use it, shipped code may not)`;
  }
  const where = inTest ? 'tests of' : 'shipped code of';
  return `${where} ${from.role} package ${from.name} may not import ${to.role} package ${to.name} (allowed: ${allowed.join(', ') || 'no workspace package'})`;
}
