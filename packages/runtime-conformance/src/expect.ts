import { inspect, isDeepStrictEqual } from 'node:util';

/**
 * The few assertions the cases make, with vitest's names and messages (`<message>: expected 2 to
 * be 0`), thrown as Node's `AssertionError` (with `actual` and `expected`, so vitest shows a diff).
 * The cases use these instead of vitest's `expect` so that the suite also runs without vitest
 * (`berth runtimes verify`, through `@berth/runtime-conformance/runner`).
 */
export interface Assertion<T> {
  toBe(expected: T): void;
  toEqual(expected: T): void;
  toMatchObject(expected: Record<string, unknown>): void;
  toBeLessThan(bound: number): void;
  toBeGreaterThan(bound: number): void;
  toBeDefined(): void;
  toBeUndefined(): void;
  toContain(part: string): void;
}

/** Starts an assertion on `actual`; `message` prefixes the failure, as in vitest. */
export function expect<T>(actual: T, message?: string): Assertion<T> {
  const fail = (what: string, expected: unknown, operator: string): never => {
    throw new AssertionError(`${message === undefined ? '' : `${message}: `}expected ${show(actual)} ${what}`, actual, expected, operator);
  };
  return {
    toBe: (expected) => {
      if (!Object.is(actual, expected)) fail(`to be ${show(expected)}`, expected, 'strictEqual');
    },
    toEqual: (expected) => {
      if (!isDeepStrictEqual(actual, expected)) fail(`to deeply equal ${show(expected)}`, expected, 'deepStrictEqual');
    },
    toMatchObject: (expected) => {
      if (!matches(actual, expected)) fail(`to match object ${show(expected)}`, expected, 'matchObject');
    },
    toBeLessThan: (bound) => {
      if (!(typeof actual === 'number' && actual < bound)) fail(`to be less than ${bound}`, bound, '<');
    },
    toBeGreaterThan: (bound) => {
      if (!(typeof actual === 'number' && actual > bound)) fail(`to be greater than ${bound}`, bound, '>');
    },
    toBeDefined: () => {
      if (actual === undefined) fail('to be defined', 'defined', 'defined');
    },
    toBeUndefined: () => {
      if (actual !== undefined) fail('to be undefined', undefined, 'undefined');
    },
    toContain: (part) => {
      if (!(typeof actual === 'string' && actual.includes(part))) fail(`to contain ${show(part)}`, part, 'includes');
    },
  };
}

/** Whether every property of `expected` is in `actual` with an equal (or, for objects, matching) value. */
function matches(actual: unknown, expected: unknown): boolean {
  if (typeof expected !== 'object' || expected === null || Array.isArray(expected)) return isDeepStrictEqual(actual, expected);
  if (typeof actual !== 'object' || actual === null) return false;
  return Object.entries(expected).every(([key, value]) => matches((actual as Record<string, unknown>)[key], value));
}

function show(value: unknown): string {
  return inspect(value, { depth: 4, breakLength: Infinity, maxStringLength: 2_000 });
}

/** A failed assertion of a case: its message, and the values vitest diffs. */
class AssertionError extends Error {
  override readonly name = 'AssertionError';
  readonly actual: unknown;
  readonly expected: unknown;
  readonly operator: string;
  readonly showDiff = true;
  constructor(message: string, actual: unknown, expected: unknown, operator: string) {
    super(message);
    this.actual = actual;
    this.expected = expected;
    this.operator = operator;
  }
}
