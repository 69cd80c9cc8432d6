/**
 * Go's duration syntax (`time.ParseDuration`, `Duration.String`), in milliseconds: the one parser
 * for every duration Berth reads (flags, environment, config files, test doubles).
 */

/** Milliseconds per unit, as Go's `unitMap` (go/src/time/format.go). */
const UNIT_MS: Readonly<Record<string, number>> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3, // U+00B5 micro sign
  μs: 1e-3, // U+03BC Greek mu
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
};

/** Go's limit: a Duration is an int64 of nanoseconds (about 290 years). */
/** 2^63 ns; the rounding of doubles near it rejects the last few representable nanoseconds. */
const LIMIT_NS = 2 ** 63;

const ELEMENT = /(\d*)(?:\.(\d*))?([^\d.]+)/y;

/**
 * Parses a Go duration (`300ms`, `-1.5h`, `2h45m`, `1m30s`, `.5s`, `0`) into milliseconds, as
 * go/src/time/format.go `ParseDuration` does: a sign, then one or more decimal numbers each with
 * a unit (`ns`, `us`/`µs`, `ms`, `s`, `m`, `h`). Returns undefined for anything Go rejects.
 *
 * Gotcha: a bare number other than `0` is not a duration (`"5"` is undefined, as Go's "missing
 * unit in duration"): callers must not guess minutes or seconds. Whitespace is not trimmed.
 */
export function parseGoDuration(text: string): number | undefined {
  let s = text;
  let sign = 1;
  if (s.startsWith('-') || s.startsWith('+')) {
    if (s[0] === '-') sign = -1;
    s = s.slice(1);
  }
  if (s === '0') return 0;
  if (s === '') return undefined;
  let total = 0;
  let at = 0;
  while (at < s.length) {
    ELEMENT.lastIndex = at;
    const m = ELEMENT.exec(s);
    if (!m) return undefined;
    const [whole, int = '', frac, unit = ''] = m;
    // Go: "[0-9]*(\.[0-9]*)?" must have a digit on one side of the dot.
    if (int === '' && (frac === undefined || frac === '')) return undefined;
    const perUnit = UNIT_MS[unit];
    if (perUnit === undefined) return undefined;
    total += Number(`${int || '0'}.${frac ?? ''}0`) * perUnit;
    at += whole.length;
  }
  if (total * 1e6 >= LIMIT_NS) return undefined;
  return sign * total === 0 ? 0 : sign * total;
}

/** Formats a number with at most `digits` decimals and no trailing zeros. */
function trimmed(value: number, digits: number): string {
  return value.toFixed(digits).replace(/\.?0+$/, '');
}

/**
 * Formats milliseconds as Go's `Duration.String` does (go/src/time/time.go): `1h30m0s`, `1m30s`,
 * `1.5s`, `500ms`, `1.5µs`, `0s`. {@link parseGoDuration} reads the result back.
 */
export function formatGoDuration(ms: number): string {
  if (!Number.isFinite(ms)) throw new RangeError(`formatGoDuration: ${ms} is not a finite number of milliseconds`);
  if (ms === 0) return '0s';
  const sign = ms < 0 ? '-' : '';
  // Work in whole nanoseconds, as Go does.
  let ns = Math.round(Math.abs(ms) * 1e6);
  if (ns === 0) return '0s';
  if (ns < 1_000) return `${sign}${ns}ns`;
  if (ns < 1_000_000) return `${sign}${trimmed(ns / 1_000, 3)}µs`;
  if (ns < 1e9) return `${sign}${trimmed(ns / 1e6, 6)}ms`;
  const hours = Math.floor(ns / 3.6e12);
  ns -= hours * 3.6e12;
  const minutes = Math.floor(ns / 6e10);
  ns -= minutes * 6e10;
  const seconds = `${trimmed(ns / 1e9, 9)}s`;
  if (hours > 0) return `${sign}${hours}h${minutes}m${seconds}`;
  if (minutes > 0) return `${sign}${minutes}m${seconds}`;
  return `${sign}${seconds}`;
}
