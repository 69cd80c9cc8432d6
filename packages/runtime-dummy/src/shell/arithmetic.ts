/**
 * `$(( ))` of the dummy's shell: integers, `+ - * / %`, comparisons, `&& ||`, `!`, unary signs,
 * parentheses and variable names (unset or non-numeric variables are 0, as in sh).
 */
import { ShellExit } from './errors.ts';

const PRECEDENCE: Readonly<Record<string, number>> = {
  '||': 1,
  '&&': 2,
  '==': 3,
  '!=': 3,
  '<': 4,
  '>': 4,
  '<=': 4,
  '>=': 4,
  '+': 5,
  '-': 5,
  '*': 6,
  '/': 6,
  '%': 6,
};

/** Evaluates `expr`, reading variables with `variable`. A truncated expression exits the shell with 2. */
export function evaluateArithmetic(expr: string, variable: (name: string) => string | undefined): number {
  const tokens = expr.match(/\d+|[A-Za-z_][A-Za-z0-9_]*|==|!=|<=|>=|&&|\|\||[-+*/%()<>!]/g) ?? [];
  let pos = 0;
  const next = (): string | undefined => tokens[pos++];
  const peek = (): string | undefined => tokens[pos];
  const primary = (): number => {
    const t = next();
    if (t === undefined) throw new ShellExit(2);
    if (t === '(') {
      const value = binary(0);
      next();
      return value;
    }
    if (t === '-') return -primary();
    if (t === '+') return primary();
    if (t === '!') return primary() === 0 ? 1 : 0;
    if (/^\d+$/.test(t)) return Number(t);
    return Number(variable(t) ?? 0) || 0;
  };
  const binary = (min: number): number => {
    let left = primary();
    for (;;) {
      const op = peek();
      const p = op === undefined ? undefined : PRECEDENCE[op];
      if (op === undefined || p === undefined || p < min) return left;
      next();
      const right = binary(p + 1);
      left = applyOp(op, left, right);
    }
  };
  return binary(0);
}

function applyOp(op: string, a: number, b: number): number {
  switch (op) {
    case '+':
      return a + b;
    case '-':
      return a - b;
    case '*':
      return a * b;
    case '/':
      return Math.trunc(a / b);
    case '%':
      return a % b;
    case '==':
      return a === b ? 1 : 0;
    case '!=':
      return a !== b ? 1 : 0;
    case '<':
      return a < b ? 1 : 0;
    case '>':
      return a > b ? 1 : 0;
    case '<=':
      return a <= b ? 1 : 0;
    case '>=':
      return a >= b ? 1 : 0;
    case '&&':
      return a && b ? 1 : 0;
    default:
      return a || b ? 1 : 0;
  }
}
