/**
 * The `.env` file go-vela/worker loads at start (cmd/vela-worker/main.go imports
 * `github.com/joho/godotenv/autoload`, whose `init` calls `godotenv.Load()`): `.env` in the
 * working directory, never overriding a variable already set. Parsed as godotenv v1.5.1's
 * parser.go `parseBytes` does.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';

/** A `.env` file that is not valid: where and why. */
export class DotenvError extends Error {
  override readonly name = 'DotenvError';
}

const isSpace = (c: string): boolean => c === ' ' || c === '\t' || c === '\v' || c === '\f' || c === '\r' || c === '\u0085' || c === '\u00a0';

/** godotenv's expandVariables: `$NAME`, `${NAME}` from variables defined earlier in the file; `\$` stays literal. */
function expand(value: string, vars: Record<string, string>): string {
  return value.replace(/(\\)?(\$)(\()?\{?([A-Z0-9_]+)?\}?/g, (match: string, escaped?: string, _dollar?: string, paren?: string, name?: string) => {
    if (escaped === '\\' || paren === '(') return match.slice(1);
    if (name) return vars[name] ?? '';
    return match;
  });
}

/** godotenv's expandEscapes for double-quoted values: `\n`, `\r`, then `\x` → `x` (except `\$`). */
function unescape(value: string): string {
  const out = value.replace(/\\./g, (m) => (m === '\\n' ? '\n' : m === '\\r' ? '\r' : m));
  return out.replace(/\\([^$])/g, '$1');
}

/**
 * Parses the text of a `.env` file: `KEY=value`, `export KEY=value`, `KEY: value`, `#` comments,
 * single quotes (literal), double quotes (escapes and `${VAR}`), unquoted values (trimmed, `${VAR}`,
 * a ` #` starts a comment). Throws a {@link DotenvError} on a bad name or an unterminated quote.
 */
export function parseDotenv(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  let src = text.replace(/\r\n/g, '\n');
  for (;;) {
    // Skip blank space and comment lines.
    const start = src.search(/\S/);
    if (start < 0) break;
    src = src.slice(start);
    if (src.startsWith('#')) {
      const nl = src.indexOf('\n');
      if (nl < 0) break;
      src = src.slice(nl);
      continue;
    }
    // The key: optional `export `, then [A-Za-z0-9_.] up to `=` or `:`.
    if (src.startsWith('export') && src.length > 6 && isSpace(src[6]!)) src = src.slice(6).replace(/^[ \t\v\f\r\u0085\u00a0]+/, '');
    let end = -1;
    for (let i = 0; i < src.length; i++) {
      const c = src[i]!;
      if (isSpace(c)) continue;
      if (c === '=' || c === ':') {
        end = i;
        break;
      }
      if (!/[\p{L}\p{N}_.]/u.test(c))
        throw new DotenvError(`unexpected character ${JSON.stringify(c)} in variable name near ${JSON.stringify(src.split('\n')[0])}`);
    }
    if (end < 0) throw new DotenvError(`${JSON.stringify(src.split('\n')[0])} has no = (write NAME=value)`);
    const key = src.slice(0, end).trimEnd();
    src = src.slice(end + 1).replace(/^[ \t\v\f\r\u0085\u00a0]+/, '');
    // The value.
    const quote = src[0];
    if (quote === '"' || quote === "'") {
      let close = -1;
      for (let i = 1; i < src.length; i++)
        if (src[i] === quote && src[i - 1] !== '\\') {
          close = i;
          break;
        }
      if (close < 0) throw new DotenvError(`unterminated quoted value ${src.split('\n')[0]!}`);
      let value = src.slice(1, close);
      if (quote === '"') value = expand(unescape(value), out);
      out[key] = value;
      src = src.slice(close + 1);
      continue;
    }
    const eol = src.search(/[\n\r]/);
    const line = eol < 0 ? src : src.slice(0, eol);
    // godotenv scans from the end: the last ` #` starts the comment.
    let comment = -1;
    for (let i = line.length - 1; i > 0; i--)
      if (line[i] === '#' && isSpace(line[i - 1]!)) {
        comment = i - 1;
        break;
      }
    out[key] = expand((comment < 0 ? line : line.slice(0, comment)).replace(/^[ \t\v\f\r\u0085\u00a0]+|[ \t\v\f\r\u0085\u00a0]+$/g, ''), out);
    src = eol < 0 ? '' : src.slice(eol);
  }
  return out;
}

/**
 * Reads `.env` in `dir`: its variables, or undefined when there is none. Throws a
 * {@link DotenvError} naming the file when it cannot be read or parsed (godotenv's autoload
 * would silently skip the whole file; Berth says so instead of starting half-configured).
 */
export function loadDotenv(dir: string): { file: string; values: Record<string, string> } | undefined {
  const file = path.join(dir, '.env');
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new DotenvError(`cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  try {
    return { file, values: parseDotenv(text) };
  } catch (e) {
    throw new DotenvError(`${file}: ${(e as Error).message}`);
  }
}
