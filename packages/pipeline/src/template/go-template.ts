/**
 * A focused subset of Go's `text/template` with the sprig functions Vela registers
 * (go-vela/server `compiler/template/native/render.go`: `sprig.TxtFuncMap()` without `env` and
 * `expandenv`, plus Vela's `vela` and `toYaml`).
 *
 * Why not an npm port: `@ctrl/golang-template` 2.0.1 (the maintained one) fails Vela's own
 * template testdata: no `$x :=` variables, no parenthesised calls, no `range $k, $v :=`, no
 * functions such as `list` or `default`.
 *
 * Supported: text and `{{ }}` actions with `{{-`/`-}}` trimming and comments; pipelines with `|`;
 * fields (`.a.b`, `$x.a`), variables (`$x := …`, `$x = …`, `$`), literals (strings, raw strings,
 * numbers, booleans, nil); `if`/`else if`/`else`, `range` (lists and maps, with `else`), `with`;
 * Go's builtins (`and or not eq ne lt le gt ge len index print printf println`) and the sprig
 * functions pipelines use (see {@link FUNCTIONS}). `define`, `template` and `block` are refused.
 */
import { stringify } from 'yaml';

/** A template that cannot be parsed or executed; `line` is 1-based in the template source. */
export class TemplateError extends Error {
  override readonly name = 'TemplateError';
  readonly line: number;
  constructor(message: string, line: number) {
    super(message);
    this.line = line;
  }
}

type Value = unknown;
type Fn = (...args: Value[]) => Value;

type Token = { t: 'str' | 'num' | 'bool' | 'nil' | 'var' | 'field' | 'ident' | '(' | ')' | '|' | ':=' | '=' | ','; v: string };

type Operand =
  | { k: 'lit'; v: Value }
  | { k: 'field'; base: Operand | null; path: string[] }
  | { k: 'var'; name: string; path: string[] }
  | { k: 'pipe'; pipe: Pipeline; path: string[] }
  | { k: 'fn'; name: string };
type Command = Operand[];
interface Pipeline {
  decl: string[];
  assign: boolean;
  cmds: Command[];
  line: number;
}
type Node =
  | { k: 'text'; v: string }
  | { k: 'action'; pipe: Pipeline }
  | { k: 'if' | 'with'; pipe: Pipeline; then: Node[]; else: Node[] }
  | { k: 'range'; pipe: Pipeline; body: Node[]; else: Node[] };

const NO_VALUE = Symbol('no value');

function tokenizeAction(src: string, line: number): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i] ?? '';
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    if (c === '"') {
      let j = i + 1;
      let v = '';
      for (; j < src.length && src[j] !== '"'; j++) {
        if (src[j] === '\\') {
          const n = src[++j] ?? '';
          v += n === 'n' ? '\n' : n === 't' ? '\t' : n;
        } else v += src[j];
      }
      if (j >= src.length) throw new TemplateError('unterminated quoted string', line);
      out.push({ t: 'str', v });
      i = j + 1;
      continue;
    }
    if (c === '`') {
      const j = src.indexOf('`', i + 1);
      if (j < 0) throw new TemplateError('unterminated raw quoted string', line);
      out.push({ t: 'str', v: src.slice(i + 1, j) });
      i = j + 1;
      continue;
    }
    if (src.startsWith(':=', i)) {
      out.push({ t: ':=', v: ':=' });
      i += 2;
      continue;
    }
    if ('()|=,'.includes(c)) {
      out.push({ t: c as Token['t'], v: c });
      i++;
      continue;
    }
    const num = /^-?(?:0x[0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/.exec(src.slice(i));
    if (num !== null && (c !== '-' || /\d/.test(src[i + 1] ?? ''))) {
      out.push({ t: 'num', v: num[0] });
      i += num[0].length;
      continue;
    }
    const m = /^(\$[A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*|\.[A-Za-z0-9_.]*|[A-Za-z_][A-Za-z0-9_]*)/.exec(src.slice(i));
    if (m === null) throw new TemplateError(`unexpected "${c}" in command`, line);
    const w = m[0];
    if (w.startsWith('$')) out.push({ t: 'var', v: w });
    else if (w.startsWith('.')) out.push({ t: 'field', v: w });
    else if (w === 'true' || w === 'false') out.push({ t: 'bool', v: w });
    else if (w === 'nil') out.push({ t: 'nil', v: w });
    else out.push({ t: 'ident', v: w });
    i += w.length;
  }
  return out;
}

const splitPath = (s: string): string[] => s.split('.').filter((p) => p !== '');

class Parser {
  private readonly funcs: Record<string, Fn>;
  private tokens: Token[] = [];
  private pos = 0;
  private line = 1;
  constructor(funcs: Record<string, Fn>) {
    this.funcs = funcs;
  }

  parse(source: string): Node[] {
    const items: { kind: 'text' | 'action'; v: string; line: number }[] = [];
    let i = 0;
    let line = 1;
    let trimNext = false;
    while (i < source.length) {
      const open = source.indexOf('{{', i);
      let text = open < 0 ? source.slice(i) : source.slice(i, open);
      if (trimNext) text = text.replace(/^\s+/, '');
      trimNext = false;
      if (open < 0) {
        items.push({ kind: 'text', v: text, line });
        break;
      }
      if (/^-\s/.test(source.slice(open + 2))) text = text.replace(/\s+$/, '');
      items.push({ kind: 'text', v: text, line });
      line += (source.slice(i, open).match(/\n/g) ?? []).length;
      const close = source.indexOf('}}', open + 2);
      if (close < 0) throw new TemplateError('unclosed action', line);
      let inner = source.slice(open + 2, close);
      if (/^-\s/.test(inner)) inner = inner.slice(1);
      if (/\s-$/.test(inner)) {
        inner = inner.slice(0, -1);
        trimNext = true;
      }
      items.push({ kind: 'action', v: inner.trim(), line });
      line += (source.slice(open, close).match(/\n/g) ?? []).length;
      i = close + 2;
    }
    let at = 0;
    const block = (ends: string[]): { nodes: Node[]; end: string } => {
      const nodes: Node[] = [];
      while (at < items.length) {
        const item = items[at++];
        if (item === undefined) break;
        this.line = item.line;
        if (item.kind === 'text') {
          if (item.v !== '') nodes.push({ k: 'text', v: item.v });
          continue;
        }
        const a = item.v;
        if (a.startsWith('/*')) {
          if (!a.endsWith('*/')) throw new TemplateError('unclosed comment', item.line);
          continue;
        }
        const word = /^[a-z]+/.exec(a)?.[0] ?? '';
        if (word === 'end' || word === 'else') {
          if (!ends.includes(word)) throw new TemplateError(`unexpected {{${word}}}`, item.line);
          return { nodes, end: a };
        }
        if (word === 'if' || word === 'with' || word === 'range') {
          nodes.push(control(word, a.slice(word.length), item.line));
          continue;
        }
        if (word === 'define' || word === 'template' || word === 'block') {
          if (word === 'template') {
            const name = /^template\s+"([^"]*)"/.exec(a)?.[1] ?? '';
            throw new TemplateError(`no such template "${name}" (template, define and block are not supported)`, item.line);
          }
          throw new TemplateError(`{{${word}}} is not supported`, item.line);
        }
        nodes.push({ k: 'action', pipe: this.pipeline(a, item.line) });
      }
      if (ends.length > 0) throw new TemplateError('unexpected EOF: missing {{end}}', this.line);
      return { nodes, end: '' };
    };
    // {{if a}}…{{else if b}}…{{else}}…{{end}}: the chained if shares the one {{end}}.
    const control = (word: 'if' | 'with' | 'range', cond: string, line: number): Node => {
      const pipe = this.pipeline(cond, line);
      const body = block(['end', 'else']);
      let elseNodes: Node[] = [];
      if (body.end.startsWith('else')) {
        const rest = body.end.slice(4).trim();
        const chained = /^(if|with)\s/.exec(rest)?.[1] as 'if' | 'with' | undefined;
        elseNodes = chained !== undefined && word !== 'range' ? [control(chained, rest.slice(chained.length), line)] : block(['end']).nodes;
      }
      if (word === 'range') return { k: 'range', pipe, body: body.nodes, else: elseNodes };
      return { k: word, pipe, then: body.nodes, else: elseNodes };
    };
    return block([]).nodes;
  }

  private pipeline(src: string, line: number): Pipeline {
    this.tokens = tokenizeAction(src, line);
    this.pos = 0;
    this.line = line;
    const p = this.pipe();
    if (this.pos < this.tokens.length) throw new TemplateError(`unexpected "${this.tokens[this.pos]?.v ?? ''}" in command`, line);
    return p;
  }

  private pipe(): Pipeline {
    const decl: string[] = [];
    let assign = false;
    const save = this.pos;
    while (this.tokens[this.pos]?.t === 'var') {
      decl.push(this.tokens[this.pos]?.v ?? '');
      this.pos++;
      const t = this.tokens[this.pos]?.t;
      if (t === ',') {
        this.pos++;
        continue;
      }
      if (t === ':=' || t === '=') {
        assign = t === '=';
        this.pos++;
        break;
      }
      decl.length = 0;
      this.pos = save;
      break;
    }
    const cmds: Command[] = [];
    for (;;) {
      const cmd: Command = [];
      while (this.pos < this.tokens.length && this.tokens[this.pos]?.t !== '|' && this.tokens[this.pos]?.t !== ')') cmd.push(this.operand());
      if (cmd.length === 0) throw new TemplateError('missing value for command', this.line);
      cmds.push(cmd);
      if (this.tokens[this.pos]?.t !== '|') break;
      this.pos++;
    }
    return { decl, assign, cmds, line: this.line };
  }

  private operand(): Operand {
    const t = this.tokens[this.pos++];
    if (t === undefined) throw new TemplateError('unexpected end of command', this.line);
    switch (t.t) {
      case 'str':
        return { k: 'lit', v: t.v };
      case 'num':
        return { k: 'lit', v: Number(t.v) };
      case 'bool':
        return { k: 'lit', v: t.v === 'true' };
      case 'nil':
        return { k: 'lit', v: null };
      case 'field':
        return { k: 'field', base: null, path: splitPath(t.v) };
      case 'var': {
        const [name = '$', ...path] = t.v.split('.');
        return { k: 'var', name, path };
      }
      case 'ident':
        if (!(t.v in this.funcs)) throw new TemplateError(`function "${t.v}" not defined`, this.line);
        return { k: 'fn', name: t.v };
      case '(': {
        const pipe = this.pipe();
        if (this.tokens[this.pos]?.t !== ')') throw new TemplateError('unclosed left paren', this.line);
        this.pos++;
        let path: string[] = [];
        const next = this.tokens[this.pos];
        if (next?.t === 'field') {
          path = splitPath(next.v);
          this.pos++;
        }
        return { k: 'pipe', pipe, path };
      }
      default:
        throw new TemplateError(`unexpected "${t.v}" in operand`, this.line);
    }
  }
}

function truthy(v: Value): boolean {
  if (v === null || v === undefined || v === NO_VALUE || v === false || v === 0 || v === '') return false;
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === 'object') return Object.keys(v).length > 0;
  return true;
}

/** Go's `fmt.Sprint` of a value, as `{{ x }}` prints it. */
function goString(v: Value): string {
  if (v === NO_VALUE) return '<no value>';
  if (v === null || v === undefined) return '<nil>';
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return `[${v.map(goString).join(' ')}]`;
  if (typeof v === 'object') {
    const o = v as Record<string, Value>;
    return `map[${Object.keys(o)
      .sort()
      .map((k) => `${k}:${goString(o[k])}`)
      .join(' ')}]`;
  }
  return typeof v === 'symbol' ? '' : JSON.stringify(v);
}

function field(v: Value, path: string[], line: number): Value {
  let cur = v;
  for (const p of path) {
    if (cur === null || cur === undefined || cur === NO_VALUE) return NO_VALUE;
    if (typeof cur !== 'object' || Array.isArray(cur))
      throw new TemplateError(`can't evaluate field ${p} in type ${Array.isArray(cur) ? 'list' : typeof cur}`, line);
    const o = cur as Record<string, Value>;
    cur = Object.hasOwn(o, p) ? o[p] : NO_VALUE;
  }
  return cur;
}

const cmp = (a: Value, b: Value): number => {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'string' && typeof b === 'string') return a < b ? -1 : a > b ? 1 : 0;
  throw new Error(`incompatible types for comparison`);
};
const num = (v: Value): number => (typeof v === 'number' ? v : Number.parseFloat(goString(v)) || 0);
const str = (v: Value): string => (v === NO_VALUE || v === null || v === undefined ? '' : goString(v));
const list = (v: Value): Value[] => (Array.isArray(v) ? v : v === null || v === undefined || v === NO_VALUE ? [] : [v]);

function sprintf(format: string, args: Value[]): string {
  let i = 0;
  return format.replace(/%([-+# 0]*\d*(?:\.\d+)?)([svdqtfx%])/g, (_m, _flags: string, verb: string) => {
    if (verb === '%') return '%';
    const a = args[i++];
    if (verb === 'q') return JSON.stringify(str(a));
    if (verb === 'd') return String(Math.trunc(num(a)));
    if (verb === 'f') return num(a).toFixed(6);
    if (verb === 'x') return Math.trunc(num(a)).toString(16);
    return goString(a);
  });
}

/**
 * Go's builtins and the sprig functions Vela pipelines use. `env` and `expandenv` are absent, as
 * Vela deletes them.
 */
const FUNCTIONS: Record<string, Fn> = {
  and: (...a) => a.find((x) => !truthy(x)) ?? a[a.length - 1],
  or: (...a) => a.find((x) => truthy(x)) ?? a[a.length - 1],
  not: (a) => !truthy(a),
  eq: (a, ...b) => b.some((x) => x === a || (a === NO_VALUE && x === null)),
  ne: (a, b) => a !== b,
  lt: (a, b) => cmp(a, b) < 0,
  le: (a, b) => cmp(a, b) <= 0,
  gt: (a, b) => cmp(a, b) > 0,
  ge: (a, b) => cmp(a, b) >= 0,
  len: (a) => (typeof a === 'string' || Array.isArray(a) ? a.length : a !== null && typeof a === 'object' ? Object.keys(a).length : 0),
  index: (a, ...keys) =>
    keys.reduce<Value>(
      (cur, k) => (Array.isArray(cur) ? cur[num(k)] : cur !== null && typeof cur === 'object' ? (cur as Record<string, Value>)[str(k)] : undefined),
      a,
    ),
  print: (...a) => a.map(goString).join(''),
  printf: (f, ...a) => sprintf(str(f), a),
  println: (...a) => `${a.map(goString).join(' ')}\n`,
  // sprig: lists and dicts
  list: (...a) => a,
  dict: (...a) => {
    const o: Record<string, Value> = {};
    for (let i = 0; i + 1 < a.length; i += 2) o[str(a[i])] = a[i + 1];
    return o;
  },
  first: (a) => list(a)[0],
  last: (a) => list(a)[list(a).length - 1],
  append: (a, v) => [...list(a), v],
  has: (v, a) => list(a).includes(v),
  keys: (...ds) => ds.flatMap((d) => Object.keys(d ?? {})).sort(),
  hasKey: (d, k) => d !== null && typeof d === 'object' && Object.hasOwn(d, str(k)),
  join: (sep, a) => list(a).map(str).join(str(sep)),
  splitList: (sep, s) => str(s).split(str(sep)),
  // sprig: defaults and flow
  default: (d, v) => (truthy(v) ? v : d),
  empty: (v) => !truthy(v),
  coalesce: (...a) => a.find(truthy) ?? null,
  ternary: (a, b, c) => (truthy(c) ? a : b),
  // sprig: strings
  upper: (s) => str(s).toUpperCase(),
  lower: (s) => str(s).toLowerCase(),
  title: (s) => str(s).replace(/\b\w/g, (c) => c.toUpperCase()),
  trim: (s) => str(s).trim(),
  trimPrefix: (p, s) => (str(s).startsWith(str(p)) ? str(s).slice(str(p).length) : str(s)),
  trimSuffix: (p, s) => (str(s).endsWith(str(p)) && str(p) !== '' ? str(s).slice(0, -str(p).length) : str(s)),
  trimAll: (c, s) => str(s).replace(new RegExp(`^[${str(c).replace(/[\]\\^-]/g, '\\$&')}]+|[${str(c).replace(/[\]\\^-]/g, '\\$&')}]+$`, 'g'), ''),
  contains: (sub, s) => str(s).includes(str(sub)),
  hasPrefix: (p, s) => str(s).startsWith(str(p)),
  hasSuffix: (p, s) => str(s).endsWith(str(p)),
  replace: (old, neu, s) => str(s).replaceAll(str(old), str(neu)),
  repeat: (n, s) => str(s).repeat(Math.max(0, num(n))),
  quote: (...a) => a.map((x) => JSON.stringify(str(x))).join(' '),
  squote: (...a) => a.map((x) => `'${str(x)}'`).join(' '),
  cat: (...a) =>
    a
      .filter((x) => x !== null && x !== undefined && x !== NO_VALUE)
      .map(goString)
      .join(' '),
  nospace: (s) => str(s).replace(/\s/g, ''),
  indent: (n, s) => str(s).replace(/^/gm, ' '.repeat(num(n))),
  nindent: (n, s) => `\n${str(s).replace(/^/gm, ' '.repeat(num(n)))}`,
  toString: (v: Value) => str(v),
  toJson: (v) => JSON.stringify(v === NO_VALUE ? null : v),
  b64enc: (s) => Buffer.from(str(s), 'utf8').toString('base64'),
  b64dec: (s) => Buffer.from(str(s), 'base64').toString('utf8'),
  // sprig: numbers
  int: (v) => Math.trunc(num(v)),
  add: (...a) => a.reduce<number>((x, y) => x + num(y), 0),
  sub: (a, b) => num(a) - num(b),
  mul: (...a) => a.reduce<number>((x, y) => x * num(y), 1),
  div: (a, b) => Math.trunc(num(a) / num(b)),
  mod: (a, b) => num(a) % num(b),
  // Vela (render.go): toYaml
  toYaml: (v) => (v === NO_VALUE || v === null || v === undefined ? '' : stringify(v).replace(/\n$/, '')),
};

type Scope = Map<string, Value>[];

function lookupVar(scope: Scope, name: string, line: number): Value {
  for (let i = scope.length - 1; i >= 0; i--) if (scope[i]?.has(name)) return scope[i]?.get(name);
  throw new TemplateError(`undefined variable "${name}"`, line);
}

function setVar(scope: Scope, name: string, v: Value, assign: boolean, line: number): void {
  if (assign) {
    for (let i = scope.length - 1; i >= 0; i--) {
      if (scope[i]?.has(name)) {
        scope[i]?.set(name, v);
        return;
      }
    }
    throw new TemplateError(`undefined variable "${name}"`, line);
  }
  scope[scope.length - 1]?.set(name, v);
}

class Executor {
  private readonly funcs: Record<string, Fn>;
  constructor(funcs: Record<string, Fn>) {
    this.funcs = funcs;
  }

  run(nodes: Node[], dot: Value, scope: Scope): string {
    let out = '';
    for (const n of nodes) {
      switch (n.k) {
        case 'text':
          out += n.v;
          break;
        case 'action': {
          const v = this.pipe(n.pipe, dot, scope);
          if (n.pipe.decl.length === 0) out += goString(v);
          break;
        }
        case 'if':
        case 'with': {
          scope.push(new Map());
          const v = this.pipe(n.pipe, dot, scope);
          out += truthy(v) ? this.run(n.then, n.k === 'with' ? v : dot, scope) : this.run(n.else, dot, scope);
          scope.pop();
          break;
        }
        case 'range': {
          scope.push(new Map());
          const decl = n.pipe.decl;
          const v = this.pipe({ ...n.pipe, decl: [] }, dot, scope);
          const entries: [Value, Value][] = Array.isArray(v)
            ? v.map((x, i) => [i, x])
            : v !== null && typeof v === 'object'
              ? Object.keys(v)
                  .sort()
                  .map((k) => [k, (v as Record<string, Value>)[k]])
              : typeof v === 'number'
                ? Array.from({ length: v }, (_, i) => [i, i])
                : [];
          if (entries.length === 0) out += this.run(n.else, dot, scope);
          for (const [k, x] of entries) {
            scope.push(new Map());
            if (decl.length === 1) setVar(scope, decl[0] ?? '', x, false, n.pipe.line);
            if (decl.length === 2) {
              setVar(scope, decl[0] ?? '', k, false, n.pipe.line);
              setVar(scope, decl[1] ?? '', x, false, n.pipe.line);
            }
            out += this.run(n.body, x, scope);
            scope.pop();
          }
          scope.pop();
          break;
        }
      }
    }
    return out;
  }

  private pipe(p: Pipeline, dot: Value, scope: Scope): Value {
    let v: Value = undefined;
    let first = true;
    for (const cmd of p.cmds) {
      v = this.command(cmd, dot, scope, first ? undefined : { v }, p.line);
      first = false;
    }
    if (p.decl.length > 0) setVar(scope, p.decl[p.decl.length - 1] ?? '', v, p.assign, p.line);
    return v;
  }

  private command(cmd: Command, dot: Value, scope: Scope, piped: { v: Value } | undefined, line: number): Value {
    const [head, ...rest] = cmd;
    if (head?.k === 'fn') {
      const args = rest.map((o) => this.operand(o, dot, scope, line));
      if (piped !== undefined) args.push(piped.v);
      const fn = this.funcs[head.name];
      if (fn === undefined) throw new TemplateError(`function "${head.name}" not defined`, line);
      try {
        return fn(...args);
      } catch (error) {
        if (error instanceof TemplateError) throw error;
        throw new TemplateError(`error calling ${head.name}: ${(error as Error).message}`, line);
      }
    }
    if (rest.length > 0 || piped !== undefined) throw new TemplateError(`can't give argument to non-function`, line);
    return head === undefined ? undefined : this.operand(head, dot, scope, line);
  }

  private operand(o: Operand, dot: Value, scope: Scope, line: number): Value {
    switch (o.k) {
      case 'lit':
        return o.v;
      case 'field':
        return field(dot, o.path, line);
      case 'var':
        return field(lookupVar(scope, o.name, line), o.path, line);
      case 'pipe':
        return field(this.pipe(o.pipe, dot, scope), o.path, line);
      case 'fn': {
        const fn = this.funcs[o.name];
        if (fn === undefined) throw new TemplateError(`function "${o.name}" not defined`, line);
        return fn();
      }
    }
  }
}

/**
 * Renders `source` with `data` as `.` (and `$`), Go `text/template` style. `extra` functions are
 * laid over {@link FUNCTIONS}. Throws {@link TemplateError} (with the template line) when the
 * template does not parse (`function "foobar" not defined`) or fails while executing.
 */
export function renderGoTemplate(source: string, data: Value, extra: Record<string, Fn> = {}): string {
  const funcs = { ...FUNCTIONS, ...extra };
  const nodes = new Parser(funcs).parse(source);
  return new Executor(funcs).run(nodes, data, [new Map([['$', data]])]);
}

/**
 * Vela's own template functions (render.go, convert.go): `vela "name"` reads a `VELA_*` (or
 * `DEPLOYMENT_PARAMETER_*`) variable of the step's environment, case-insensitively and with or
 * without its prefix, `template_name` is the calling step's name; `toYaml` is in {@link FUNCTIONS}.
 */
export function velaFunctions(environment: Readonly<Record<string, string>>, stepName: string): Record<string, Fn> {
  const envs = new Map<string, string>();
  for (const [k, v] of Object.entries(environment)) {
    const key = k.toLowerCase();
    if (key.startsWith('deployment_parameter_')) envs.set(key, v);
    if (key.startsWith('vela_')) envs.set(key.slice(5), v);
  }
  envs.set('template_name', stepName);
  return {
    vela: (name) => {
      const key = str(name).toLowerCase();
      for (const prefix of ['deployment_parameter_', 'vela_']) {
        const trimmed = key.startsWith(prefix) ? key.slice(prefix.length) : key;
        const v = envs.get(trimmed);
        if (v !== undefined) return v;
      }
      return '';
    },
  };
}
