import { describe, expect, it } from 'vitest';
import { evaluateArithmetic } from '../src/shell/arithmetic.ts';
import { ShellExit } from '../src/shell/errors.ts';

describe('evaluateArithmetic ($(( )) of the dummy shell)', () => {
  const vars: Record<string, string> = { N: '7', WORD: 'abc' };
  const variable = (name: string): string | undefined => vars[name];

  it.each([
    ['1 + 2 * 3', 7],
    ['(1 + 2) * 3', 9],
    ['N % 4', 3],
    ['-N + 10', 3],
    ['7 / 2', 3],
    ['N > 5 && N < 10', 1],
    ['!0 || 0', 1],
    ['N == 7', 1],
    ['UNSET + WORD', 0],
  ])('%s = %d', (expr, value) => {
    expect(evaluateArithmetic(expr, variable)).toBe(value);
  });

  it('a truncated expression exits the shell with 2', () => {
    expect(() => evaluateArithmetic('1 +', variable)).toThrow(ShellExit);
  });
});
