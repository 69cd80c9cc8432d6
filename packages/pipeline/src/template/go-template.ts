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
import { FUNCTIONS } from './functions.ts';
import { type Command, type Node, type Operand, Parser, type Pipeline } from './parse.ts';
import { field, type Fn, goString, TemplateError, truthy, type Value } from './values.ts';

export { velaFunctions } from './functions.ts';
export { TemplateError } from './values.ts';

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
