/**
 * `ruleset: eval:` expressions: the subset of expr-lang (github.com/expr-lang/expr) that Vela
 * documents, evaluated as go-vela/server's `compiler/types/pipeline/ruleset.go` `MatchRules` does:
 * `expr.Compile(eval, expr.Env(data.Env), expr.AllowUndefinedVariables(), expr.AsBool())`.
 *
 * The subset: comparisons (`== != < <= > >=`), `&&`/`and`, `||`/`or`, `!`/`not`, `in` and
 * `not in` a list literal, `matches` (a Go regular expression), `contains`, `startsWith`,
 * `endsWith`, parentheses, string (`'…'`, `"…"`), number, `true`/`false`/`nil` literals, and
 * variables (the step's environment: `VELA_*` and the pipeline's own). Anything else is refused
 * when the pipeline is validated, with a message naming what is outside the subset.
 */
import { goRegExp, RulesetError } from './go-regexp.ts';

/** A parsed eval expression. */
export type EvalExpression =
  | { kind: 'literal'; value: string | number | boolean | null }
  | { kind: 'variable'; name: string }
  | { kind: 'list'; items: EvalExpression[] }
  | { kind: 'not'; operand: EvalExpression }
  | { kind: 'binary'; op: BinaryOperator; left: EvalExpression; right: EvalExpression };

type BinaryOperator = '||' | '&&' | '==' | '!=' | '<' | '<=' | '>' | '>=' | 'in' | 'not in' | 'matches' | 'contains' | 'startsWith' | 'endsWith';

/** What {@link parseEval} returns: the expression, or why it cannot be evaluated. */
export type EvalParseResult = { ok: true; expression: EvalExpression } | { ok: false; error: string };

/** The subset, as told to a user whose expression falls outside it. */
export const EVAL_SUBSET =
  'use comparisons (== != < <= > >=), && || !, in [..], matches, contains, startsWith, endsWith, string and number literals, and variables such as VELA_BUILD_BRANCH';

type Token = { type: 'string' | 'number' | 'word' | 'op' | 'end'; text: string; value?: string | number; at: number };

const OPERATORS = ['==', '!=', '<=', '>=', '&&', '||', '<', '>', '!', '(', ')', '[', ']', ','];
const UNSUPPORTED_OPERATORS = ['??', '?.', '**', '..', '?', ':', '+', '-', '*', '/', '%', '|', '.', '#', '{', '}'];
const WORD_OPERATORS = new Set(['and', 'or', 'not', 'in', 'matches', 'contains', 'startsWith', 'endsWith']);

class EvalSyntaxError extends Error {}

function tokenize(source: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < source.length) {
    const c = source[i] ?? '';
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    const at = i + 1;
    if (c === '"' || c === "'") {
      let value = '';
      let j = i + 1;
      for (; j < source.length && source[j] !== c; j++) {
        if (source[j] === '\\') {
          const next = source[++j] ?? '';
          value += next === 'n' ? '\n' : next === 't' ? '\t' : next;
        } else {
          value += source[j];
        }
      }
      if (j >= source.length) throw new EvalSyntaxError(`unterminated string starting at column ${at}`);
      tokens.push({ type: 'string', text: source.slice(i, j + 1), value, at });
      i = j + 1;
      continue;
    }
    const number = /^(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?/.exec(source.slice(i));
    if (number !== null) {
      tokens.push({ type: 'number', text: number[0], value: Number(number[0]), at });
      i += number[0].length;
      continue;
    }
    const word = /^[A-Za-z_$][A-Za-z0-9_$]*/.exec(source.slice(i));
    if (word !== null) {
      tokens.push({ type: 'word', text: word[0], at });
      i += word[0].length;
      continue;
    }
    const op = OPERATORS.find((o) => source.startsWith(o, i));
    // A unary minus directly before a number is part of the literal.
    if (
      c === '-' &&
      /^\d|^\.\d/.test(source.slice(i + 1)) &&
      (tokens.length === 0 || ['op'].includes(tokens[tokens.length - 1]?.type ?? '') || WORD_OPERATORS.has(tokens[tokens.length - 1]?.text ?? ''))
    ) {
      const prev = tokens[tokens.length - 1];
      if (prev === undefined || (prev.text !== ')' && prev.text !== ']')) {
        const m = /^-(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?/.exec(source.slice(i));
        if (m !== null) {
          tokens.push({ type: 'number', text: m[0], value: Number(m[0]), at });
          i += m[0].length;
          continue;
        }
      }
    }
    if (op !== undefined) {
      tokens.push({ type: 'op', text: op, at });
      i += op.length;
      continue;
    }
    const unsupported = UNSUPPORTED_OPERATORS.find((o) => source.startsWith(o, i));
    if (unsupported !== undefined) throw new EvalSyntaxError(`"${unsupported}" is outside the expression subset Berth supports (column ${at})`);
    throw new EvalSyntaxError(`unexpected character "${c}" at column ${at}`);
  }
  tokens.push({ type: 'end', text: '', at: source.length + 1 });
  return tokens;
}

/** Recursive descent with expr-lang's precedence: `||` < `&&` < comparisons (left-associative) < unary. */
class Parser {
  private pos = 0;
  private readonly tokens: Token[];
  constructor(tokens: Token[]) {
    this.tokens = tokens;
  }

  private peek(): Token {
    return this.tokens[this.pos] ?? { type: 'end', text: '', at: 0 };
  }

  private next(): Token {
    const t = this.peek();
    this.pos++;
    return t;
  }

  private is(text: string): boolean {
    const t = this.peek();
    return (t.type === 'op' || t.type === 'word') && t.text === text;
  }

  parse(): EvalExpression {
    const e = this.or();
    const t = this.peek();
    if (t.type !== 'end') throw new EvalSyntaxError(`unexpected "${t.text}" at column ${t.at}`);
    return e;
  }

  private or(): EvalExpression {
    let left = this.and();
    while (this.is('||') || this.is('or')) {
      this.next();
      left = { kind: 'binary', op: '||', left, right: this.and() };
    }
    return left;
  }

  private and(): EvalExpression {
    let left = this.comparison();
    while (this.is('&&') || this.is('and')) {
      this.next();
      left = { kind: 'binary', op: '&&', left, right: this.comparison() };
    }
    return left;
  }

  private comparison(): EvalExpression {
    let left = this.unary();
    for (;;) {
      const t = this.peek();
      let op: BinaryOperator | undefined;
      if (t.type === 'op' && ['==', '!=', '<', '<=', '>', '>='].includes(t.text)) op = t.text as BinaryOperator;
      else if (t.type === 'word' && ['in', 'matches', 'contains', 'startsWith', 'endsWith'].includes(t.text)) op = t.text as BinaryOperator;
      else if (t.type === 'word' && t.text === 'not' && this.tokens[this.pos + 1]?.text === 'in') {
        this.next();
        op = 'not in';
      }
      if (op === undefined) return left;
      this.next();
      left = { kind: 'binary', op, left, right: this.unary() };
    }
  }

  private unary(): EvalExpression {
    if (this.is('!') || this.is('not')) {
      this.next();
      return { kind: 'not', operand: this.unary() };
    }
    return this.primary();
  }

  private primary(): EvalExpression {
    const t = this.next();
    switch (t.type) {
      case 'end':
        throw new EvalSyntaxError('unexpected end of the expression');
      case 'string':
      case 'number':
        return { kind: 'literal', value: t.value ?? null };
      case 'word': {
        if (t.text === 'true' || t.text === 'false') return { kind: 'literal', value: t.text === 'true' };
        if (t.text === 'nil') return { kind: 'literal', value: null };
        if (WORD_OPERATORS.has(t.text)) throw new EvalSyntaxError(`unexpected "${t.text}" at column ${t.at}`);
        if (this.is('(')) throw new EvalSyntaxError(`function calls (${t.text}) are outside the expression subset Berth supports (column ${t.at})`);
        return { kind: 'variable', name: t.text };
      }
      case 'op': {
        if (t.text === '(') {
          const e = this.or();
          if (!this.is(')')) throw new EvalSyntaxError(`missing ")" for the "(" at column ${t.at}`);
          this.next();
          return e;
        }
        if (t.text === '[') {
          const items: EvalExpression[] = [];
          while (!this.is(']')) {
            items.push(this.or());
            if (this.is(',')) this.next();
            else if (!this.is(']')) throw new EvalSyntaxError(`expected "," or "]" at column ${this.peek().at}`);
          }
          this.next();
          return { kind: 'list', items };
        }
        throw new EvalSyntaxError(`unexpected "${t.text}" at column ${t.at}`);
      }
    }
  }
}

type StaticType = 'string' | 'number' | 'bool' | 'nil' | 'list' | 'any';

const describeType = (t: StaticType): string => (t === 'bool' ? 'a condition' : t === 'list' ? 'a list' : t === 'nil' ? 'nil' : `a ${t}`);

/**
 * expr-lang's compile-time type check with `expr.Env(map[string]string)`: variables are strings
 * (or nil when undefined at run time, which `==`/`!=` allow).
 */
function typeOf(e: EvalExpression): StaticType {
  switch (e.kind) {
    case 'literal':
      return e.value === null ? 'nil' : typeof e.value === 'string' ? 'string' : typeof e.value === 'number' ? 'number' : 'bool';
    case 'variable':
      return 'string';
    case 'list':
      for (const item of e.items) typeOf(item);
      return 'list';
    case 'not': {
      const t = typeOf(e.operand);
      if (t !== 'bool' && t !== 'any') throw new EvalSyntaxError(`"!" needs a condition, but got ${describeType(t)}`);
      return 'bool';
    }
    case 'binary': {
      const l = typeOf(e.left);
      const r = typeOf(e.right);
      switch (e.op) {
        case '||':
        case '&&':
          for (const t of [l, r])
            if (t !== 'bool' && t !== 'any') throw new EvalSyntaxError(`"${e.op}" needs conditions on both sides, but got ${describeType(t)}`);
          return 'bool';
        case '==':
        case '!=':
          if (l !== r && l !== 'nil' && r !== 'nil' && l !== 'any' && r !== 'any')
            throw new EvalSyntaxError(`cannot compare ${describeType(l)} with ${describeType(r)} (environment variables are strings: quote the number)`);
          return 'bool';
        case '<':
        case '<=':
        case '>':
        case '>=':
          if (!((l === 'string' && r === 'string') || (l === 'number' && r === 'number')))
            throw new EvalSyntaxError(
              `cannot compare ${describeType(l)} with ${describeType(r)} using "${e.op}" (environment variables are strings: quote the number)`,
            );
          return 'bool';
        case 'in':
        case 'not in':
          if (r !== 'list') throw new EvalSyntaxError(`"${e.op}" needs a list on its right, e.g. VELA_BUILD_EVENT in ["push", "tag"]`);
          return 'bool';
        case 'matches':
          if (l !== 'string' || r !== 'string') throw new EvalSyntaxError('"matches" needs strings on both sides');
          if (e.right.kind === 'literal' && typeof e.right.value === 'string') {
            try {
              goRegExp(e.right.value);
            } catch (error) {
              throw new EvalSyntaxError(`invalid regular expression ${JSON.stringify(e.right.value)}: ${(error as Error).message}`);
            }
          }
          return 'bool';
        case 'contains':
        case 'startsWith':
        case 'endsWith':
          if (l !== 'string' || r !== 'string') throw new EvalSyntaxError(`"${e.op}" needs strings on both sides`);
          return 'bool';
      }
    }
  }
}

/**
 * Parses and type-checks an eval expression. Never throws: an expression outside the subset, or
 * one expr-lang would refuse to compile (`VELA_BUILD_NUMBER > 5`: a string and a number; a
 * result that is not a condition), comes back with the reason.
 */
export function parseEval(source: string): EvalParseResult {
  try {
    const expression = new Parser(tokenize(source)).parse();
    const t = typeOf(expression);
    if (t !== 'bool') throw new EvalSyntaxError(`expected a condition (true or false), but got ${describeType(t)}`);
    return { ok: true, expression };
  } catch (error) {
    if (error instanceof EvalSyntaxError) return { ok: false, error: error.message };
    throw error;
  }
}

type Value = string | number | boolean | null | Value[];

function value(e: EvalExpression, env: Readonly<Record<string, string>>): Value {
  switch (e.kind) {
    case 'literal':
      return e.value;
    case 'variable':
      return Object.hasOwn(env, e.name) ? (env[e.name] ?? null) : null;
    case 'list':
      return e.items.map((i) => value(i, env));
    case 'not':
      return !truth(e.operand, env);
    case 'binary': {
      if (e.op === '||') return truth(e.left, env) || truth(e.right, env);
      if (e.op === '&&') return truth(e.left, env) && truth(e.right, env);
      const l = value(e.left, env);
      const r = value(e.right, env);
      switch (e.op) {
        case '==':
          return equal(l, r);
        case '!=':
          return !equal(l, r);
        case 'in':
          return Array.isArray(r) && r.some((x) => equal(l, x));
        case 'not in':
          return !(Array.isArray(r) && r.some((x) => equal(l, x)));
        default: {
          const name = e.left.kind === 'variable' ? e.left.name : e.right.kind === 'variable' ? e.right.name : '';
          if (l === null || r === null) throw new RulesetError(`cannot use "${e.op}" with ${name !== '' ? `${name}, which is not set` : 'nil'}`);
          if (e.op === 'matches') return goRegExp(String(r)).test(String(l));
          if (e.op === 'contains') return String(l).includes(String(r));
          if (e.op === 'startsWith') return String(l).startsWith(String(r));
          if (e.op === 'endsWith') return String(l).endsWith(String(r));
          if (typeof l !== typeof r) throw new RulesetError(`cannot compare ${typeof l} with ${typeof r}`);
          const a = l as string | number;
          const b = r as string | number;
          if (e.op === '<') return a < b;
          if (e.op === '<=') return a <= b;
          if (e.op === '>') return a > b;
          return a >= b;
        }
      }
    }
  }
}

function equal(a: Value, b: Value): boolean {
  if (Array.isArray(a) || Array.isArray(b)) return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => equal(x, b[i] ?? null));
  return a === b;
}

function truth(e: EvalExpression, env: Readonly<Record<string, string>>): boolean {
  const v = value(e, env);
  if (typeof v !== 'boolean') throw new RulesetError(`expected a condition, but got ${JSON.stringify(v)}`);
  return v;
}

/**
 * Evaluates a parsed expression against an environment (a variable not in it is nil).
 * Throws {@link RulesetError} for an operation on an unset variable other than `==`/`!=`.
 */
export function evaluateEval(expression: EvalExpression, env: Readonly<Record<string, string>>): boolean {
  return truth(expression, env);
}

const cache = new Map<string, EvalParseResult>();

/** {@link parseEval} then {@link evaluateEval}, cached by source; throws {@link RulesetError} for a bad expression. */
export function runEval(source: string, env: Readonly<Record<string, string>>): boolean {
  let parsed = cache.get(source);
  if (parsed === undefined) {
    parsed = parseEval(source);
    cache.set(source, parsed);
  }
  if (!parsed.ok) throw new RulesetError(`failed to compile eval of ${source}: ${parsed.error}`);
  return evaluateEval(parsed.expression, env);
}
