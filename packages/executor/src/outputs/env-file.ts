/**
 * The `KEY=VALUE` files of Vela's outputs, parsed as go-vela/worker parses them: with
 * hashicorp/go-envparse's `Parse` (executor/linux/outputs.go `outputSvc.poll`), ported here.
 */

/** What {@link parseEnvFile} found: the values, or why the file was dropped. */
export type EnvFileResult = { ok: true; values: Record<string, string> } | { ok: false; line: number; error: string; values: Record<string, string> };

/**
 * Parses a `.env` file as go-envparse `Parse` does: one `KEY=VALUE` per line; blank lines and
 * `#` comments skipped; an `export ` prefix dropped; keys `[A-Za-z_][A-Za-z0-9_./]*`; values
 * trimmed, with `'single'` and `"double"` quotes (JSON escapes in double quotes) and a trailing
 * ` # comment` removed; a line whose value is empty is skipped.
 *
 * Gotcha, as go-envparse: one bad line (no `=`, a bad key, an unmatched quote, a control
 * character) fails the whole file — `values` is then empty, and Vela's poll keeps nothing of
 * that file (it logs at debug level and copies a nil map; executor/linux/outputs.go `poll`).
 */
export function parseEnvFile(text: string): EnvFileResult {
  const values: Record<string, string> = {};
  // bufio.Scanner's ScanLines: split on \n, drop one trailing \r.
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  for (let i = 0; i < lines.length; i++) {
    const raw = (lines[i] ?? '').replace(/\r$/, '');
    const parsed = parseLine(raw);
    if ('error' in parsed) return { ok: false, line: i + 1, error: parsed.error, values: {} };
    if (parsed.value.length > 0) values[parsed.key] = parsed.value;
  }
  return { ok: true, values };
}

type Line = { key: string; value: string } | { error: string };

const NORMAL = 0;
const DOUBLE = 1;
const SINGLE = 2;
const ESCAPE = 3;

/** go-envparse `parseLine`, on UTF-8 bytes as Go does. */
function parseLine(line: string): Line {
  const ln = line.trim();
  if (ln.length === 0 || ln.startsWith('#')) return { key: '', value: '' };
  const eq = ln.indexOf('=');
  if (eq < 0) return { error: 'missing =' };
  let key = ln.slice(0, eq).trim();
  const value = Buffer.from(ln.slice(eq + 1).trim(), 'utf8');
  if (key.length > 'export '.length && key.startsWith('export ')) key = key.slice('export '.length);
  if (key.length === 0) return { error: 'empty key' };
  if (!/^[A-Za-z_]/.test(key)) return { error: `key must start with [A-Za-z_] but found ${JSON.stringify(key[0])}` };
  const bad = /[^A-Za-z0-9/_.]/.exec(key.slice(1));
  if (bad) return { error: `key characters must be [A-Za-z0-9/_.] but found ${JSON.stringify(bad[0])}` };
  if (value.length === 0) return { key, value: '' };

  const out: number[] = [];
  let lastSig = 0;
  let mode = NORMAL;
  for (let i = 0; i < value.length; i++) {
    const v = value[i] as number;
    if (v < 32) return { error: `0x${v.toString(16).padStart(2, '0')} is an invalid value character` };
    if (v > 127) {
      if (mode === ESCAPE) return { error: 'multibyte characters disallowed in escape sequences' };
      out.push(v);
      lastSig = out.length;
      continue;
    }
    const c = String.fromCharCode(v);
    if (mode === NORMAL) {
      if (c === '"') mode = DOUBLE;
      else if (c === "'") mode = SINGLE;
      else if (c === '#') return { key, value: Buffer.from(out.slice(0, lastSig)).toString('utf8') };
      else {
        out.push(v);
        if (c !== ' ' && c !== '\t') lastSig = out.length;
      }
    } else if (mode === DOUBLE) {
      if (c === '"') mode = NORMAL;
      else if (c === '\\') mode = ESCAPE;
      else {
        out.push(v);
        lastSig = out.length;
      }
    } else if (mode === SINGLE) {
      if (c === "'") mode = NORMAL;
      else {
        out.push(v);
        lastSig = out.length;
      }
    } else {
      const simple: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', r: '\r', n: '\n', t: '\t' };
      const mapped = simple[c];
      if (mapped !== undefined) {
        out.push(mapped.charCodeAt(0));
      } else if (c === 'u') {
        const hex = (at: number): number | undefined => {
          const h = value.subarray(at, at + 4).toString('latin1');
          return /^[0-9a-fA-F]{4}$/.test(h) ? Number.parseInt(h, 16) : undefined;
        };
        let r = hex(i + 1);
        if (r === undefined) return { error: value.length < i + 5 ? 'incomplete hex sequence' : 'invalid hex character' };
        i += 4;
        if (r >= 0xd800 && r < 0xe000) {
          if (value.length < i + 6 || value[i + 1] !== 0x5c || value[i + 2] !== 0x75) return { error: 'incomplete Unicode surrogate pair' };
          const r2 = hex(i + 3);
          if (r2 === undefined) return { error: 'invalid hex character' };
          i += 6;
          r = r2 >= 0xdc00 && r2 < 0xe000 && r < 0xdc00 ? 0x10000 + ((r - 0xd800) << 10) + (r2 - 0xdc00) : 0xfffd;
        }
        out.push(...Buffer.from(String.fromCodePoint(r), 'utf8'));
      } else {
        return { error: `invalid escape sequence: ${JSON.stringify(c)}` };
      }
      lastSig = out.length;
      mode = DOUBLE;
    }
  }
  if (mode === DOUBLE) return { error: 'unmatched "' };
  if (mode === SINGLE) return { error: "unmatched '" };
  if (mode === ESCAPE) return { error: 'incomplete escape sequence' };
  return { key, value: Buffer.from(out).toString('utf8') };
}

const STD_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * Go's `base64.StdEncoding.DecodeString`: padded standard base64, `\r` and `\n` ignored;
 * `undefined` for anything else (Node's own decoder would accept it and return garbage).
 */
export function decodeStdBase64(value: string): string | undefined {
  const clean = value.replace(/[\r\n]/g, '');
  if (!STD_BASE64.test(clean)) return undefined;
  return Buffer.from(clean, 'base64').toString('utf8');
}
