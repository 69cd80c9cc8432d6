/** The functions templates may call: Go's builtins, the sprig subset Vela registers, and Vela's own. */
import { stringify } from 'yaml';
import { cmp, type Fn, goString, list, NO_VALUE, num, sprintf, str, truthy, type Value } from './values.ts';

/**
 * Go's builtins and the sprig functions Vela pipelines use. `env` and `expandenv` are absent, as
 * Vela deletes them.
 */
export const FUNCTIONS: Record<string, Fn> = {
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
