/** The values Go templates work on, and how Go prints and compares them (fmt, text/template's exec.go). */

/** A template that cannot be parsed or executed; `line` is 1-based in the template source. */
export class TemplateError extends Error {
  override readonly name = 'TemplateError';
  readonly line: number;
  constructor(message: string, line: number) {
    super(message);
    this.line = line;
  }
}

export type Value = unknown;
export type Fn = (...args: Value[]) => Value;

/** Go's `<no value>`: a missing map key or field. */
export const NO_VALUE = Symbol('no value');

export function truthy(v: Value): boolean {
  if (v === null || v === undefined || v === NO_VALUE || v === false || v === 0 || v === '') return false;
  if (Array.isArray(v)) return v.length > 0;
  if (typeof v === 'object') return Object.keys(v).length > 0;
  return true;
}

/** Go's `fmt.Sprint` of a value, as `{{ x }}` prints it. */
export function goString(v: Value): string {
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

export function field(v: Value, path: string[], line: number): Value {
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

export const cmp = (a: Value, b: Value): number => {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'string' && typeof b === 'string') return a < b ? -1 : a > b ? 1 : 0;
  throw new Error(`incompatible types for comparison`);
};
export const num = (v: Value): number => (typeof v === 'number' ? v : Number.parseFloat(goString(v)) || 0);
export const str = (v: Value): string => (v === NO_VALUE || v === null || v === undefined ? '' : goString(v));
export const list = (v: Value): Value[] => (Array.isArray(v) ? v : v === null || v === undefined || v === NO_VALUE ? [] : [v]);

export function sprintf(format: string, args: Value[]): string {
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
