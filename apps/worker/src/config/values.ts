/**
 * The value types of the settings table, parsed as go-vela/worker parses them (urfave/cli v3.8
 * flag types, Go's strconv and time packages, and cmd/vela-worker/run.go for log settings), with
 * the message a user sees when a value is not one.
 */
import { parseGoDuration } from '@berth/context';

/** Log levels of Berth's own log, as pino names them (`panic` is Go's, kept for its spelling). */
const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'panic', 'silent'] as const;
/** A log level. */
export type LogLevel = (typeof LOG_LEVELS)[number];

/** What a value type parses to. */
export interface ValueTypes {
  string: string;
  path: string;
  int: number;
  uint: number;
  bool: boolean;
  duration: number;
  list: string[];
  /** `key=value` items; a comma splits items only before another `key=` (values keep their commas). */
  pairs: string[];
  logLevel: LogLevel;
  logFormat: 'json' | 'text';
  bytes: number;
  cpus: number;
  listen: { host: string; port: number };
}
/** A value type of the table. */
export type ValueType = keyof ValueTypes;

/** A parse result: the value, or what is wrong with the input. */
export type Parsed<T> = { ok: true; value: T } | { ok: false; message: string };

const ok = <T>(value: T): Parsed<T> => ({ ok: true, value });
const bad = (message: string): Parsed<never> => ({ ok: false, message });
const quote = (v: string): string => JSON.stringify(v);

/**
 * Go's `strconv.ParseInt(s, 0, 64)` as urfave/cli's IntFlag calls it (flag_int.go, base 0):
 * a sign, then decimal, `0x`/`0o`/`0`/`0b` prefixed digits, with `_` between digits.
 */
export function parseGoInt(text: string): number | undefined {
  const m = /^([+-]?)(0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO]?[0-7_]*|[1-9][0-9_]*)$/.exec(text);
  if (!m) return undefined;
  const body = m[2]!;
  if (/^0[oO]$/.test(body)) return undefined;
  // strconv's underscoreOK: an underscore only between digits, a base prefix counting as a digit.
  if (!/^[0-9a-fA-F](_?[0-9a-fA-F])*$/.test(body.replace(/^0[xXbBoO]/, '0'))) return undefined;
  const digits = body.replace(/_/g, '');
  let n: number;
  if (/^0[xX]/.test(digits)) n = Number.parseInt(digits.slice(2), 16);
  else if (/^0[bB]/.test(digits)) n = Number.parseInt(digits.slice(2), 2);
  else if (/^0[oO]/.test(digits)) n = Number.parseInt(digits.slice(2), 8);
  else if (/^0./.test(digits)) n = Number.parseInt(digits.slice(1), 8);
  else n = Number(digits);
  if (!Number.isSafeInteger(n)) return undefined;
  return m[1] === '-' ? -n : n;
}

/** Go's `strconv.ParseBool`. */
function parseGoBool(text: string): boolean | undefined {
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(text)) return true;
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(text)) return false;
  return undefined;
}

/**
 * A log level as cmd/vela-worker/run.go `run` switches on it (`t`, `trace`, `Trace`, `TRACE`, and so
 * on for debug, warn, error, fatal, panic, info), case-insensitively, plus `warning` and `silent`.
 * Go falls back to info on anything else; Berth refuses it, so a typo does not go unnoticed.
 */
function parseLogLevel(text: string): LogLevel | undefined {
  const t = text.toLowerCase();
  if (t === 'warning') return 'warn';
  return LOG_LEVELS.find((level) => level === t || (t.length === 1 && level !== 'silent' && level[0] === t));
}

/** A log format as run.go switches on it (`t`, `text`, `Text`, `TEXT`, `j`, `json` …), case-insensitively. */
function parseLogFormat(text: string): 'json' | 'text' | undefined {
  const t = text.toLowerCase();
  if (t === 'j' || t === 'json') return 'json';
  if (t === 't' || t === 'text') return 'text';
  return undefined;
}

const SIZE_UNITS: Record<string, number> = { '': 1, b: 1, k: 2 ** 10, m: 2 ** 20, g: 2 ** 30, t: 2 ** 40, p: 2 ** 50 };

/**
 * A memory size as Docker's `--memory` reads it (docker/go-units size.go `RAMInBytes`): a number
 * and an optional unit b, k, m, g, t, p (1024-based, with an optional `i`/`b`: `512m`, `2GiB`).
 */
function parseBytes(text: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?) ?([kKmMgGtTpP]?)[iI]?[bB]?$/.exec(text);
  if (!m) return undefined;
  return Math.floor(Number(m[1]) * SIZE_UNITS[m[2]!.toLowerCase()]!);
}

/** The parser of each value type. Input is the raw text; YAML values arrive as numbers, booleans or arrays. */
export const PARSERS: { [T in ValueType]: (raw: unknown) => Parsed<ValueTypes[T]> } = {
  string: (raw) =>
    typeof raw === 'string' || typeof raw === 'number' || typeof raw === 'boolean' ? ok(String(raw)) : bad(`must be text, got ${JSON.stringify(raw)}`),
  path: (raw) => (typeof raw === 'string' && raw !== '' ? ok(raw) : bad(`must be a file or directory path, got ${JSON.stringify(raw)}`)),
  int: (raw) => {
    const n = typeof raw === 'number' ? raw : parseGoInt(String(raw).trim());
    return n !== undefined && Number.isSafeInteger(n) ? ok(n) : bad(`must be a whole number, got ${quote(String(raw))}`);
  },
  uint: (raw) => {
    const text = String(raw).trim();
    const n = typeof raw === 'number' ? raw : /^[+-]/.test(text) ? undefined : parseGoInt(text);
    return n !== undefined && Number.isSafeInteger(n) && n >= 0 ? ok(n) : bad(`must be 0 or a positive whole number, got ${quote(String(raw))}`);
  },
  bool: (raw) => {
    const b = typeof raw === 'boolean' ? raw : parseGoBool(String(raw).trim());
    return b === undefined ? bad(`must be true or false, got ${quote(String(raw))} (Go's spellings: 1, t, T, TRUE, True, 0, f, F, FALSE, False)`) : ok(b);
  },
  duration: (raw) => {
    const text = String(raw).trim();
    const ms = parseGoDuration(text);
    if (ms !== undefined) return ok(ms);
    if (/^\d+(\.\d+)?$/.test(text))
      return bad(`must be a Go duration with a unit (${text}s, ${text}m, ${text}h), got ${quote(text)}: a bare number is not one`);
    return bad(`must be a Go duration like 30m, 15s or 1h30m, got ${quote(String(raw))}`);
  },
  list: (raw) => {
    const items = (Array.isArray(raw) ? raw.map(String) : [String(raw)]).flatMap((s) => s.split(','));
    return ok(items.map((s) => s.trim()).filter((s, i, all) => s !== '' || (i === 0 && all.length === 1)));
  },
  pairs: (raw) => {
    const items = (Array.isArray(raw) ? raw.map(String) : [String(raw)]).flatMap((s) => s.split(/,(?=\s*[^=,\s]+=)/));
    return ok(items.map((s) => s.trim()).filter((s) => s !== ''));
  },
  logLevel: (raw) => {
    const level = parseLogLevel(String(raw).trim());
    return level
      ? ok(level)
      : bad(`must be one of ${LOG_LEVELS.join(', ')} (or Go's spellings: t, d, i, w, e, f, p, Debug, INFO …), got ${quote(String(raw))}`);
  },
  logFormat: (raw) => {
    const format = parseLogFormat(String(raw).trim());
    return format ? ok(format) : bad(`must be json or text (or Go's spellings: j, JSON, Json, t, TEXT, Text), got ${quote(String(raw))}`);
  },
  bytes: (raw) => {
    const n = typeof raw === 'number' ? raw : parseBytes(String(raw).trim());
    return n !== undefined && n > 0 ? ok(n) : bad(`must be a size like 512m, 2g or 1073741824 (bytes), got ${quote(String(raw))}`);
  },
  cpus: (raw) => {
    const text = String(raw).trim();
    const n = typeof raw === 'number' ? raw : /^\d+(\.\d+)?$|^\.\d+$/.test(text) ? Number(text) : NaN;
    return Number.isFinite(n) && n > 0 ? ok(n) : bad(`must be a number of CPUs greater than 0, like 1 or 1.5, got ${quote(String(raw))}`);
  },
  listen: (raw) => {
    const text = String(raw).trim();
    const m = /^(?:(\[[^\]]+\]|[^:]*):)?(\d{1,5})$/.exec(text);
    const port = m ? Number(m[2]) : NaN;
    if (!m || !(port >= 0 && port <= 65535)) return bad(`must be host:port or :port (port 0-65535), got ${quote(text)}`);
    return ok({ host: (m[1] || '0.0.0.0').replace(/^\[|\]$/g, ''), port });
  },
};

/** `key=value` items (a `pairs` setting, already checked) as a record; a later key wins. */
export function pairsOf(items: readonly string[]): Record<string, string> {
  return Object.fromEntries(items.map((kv) => [kv.slice(0, kv.indexOf('=')).trim(), kv.slice(kv.indexOf('=') + 1)]));
}
