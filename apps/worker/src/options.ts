import { readFileSync } from 'node:fs';
import { CommandError } from './exit-codes.ts';

/** Parses repeated `NAME=VALUE` flags into a record; `what` names the flag in errors. */
export function parseAssignments(values: readonly string[], what: string): Record<string, string> {
  const out: Record<string, string> = {};
  const problems: string[] = [];
  for (const value of values) {
    const eq = value.indexOf('=');
    const name = eq < 0 ? value : value.slice(0, eq);
    if (eq <= 0 || !/^[A-Za-z_][A-Za-z0-9_.-]*$/.test(name)) {
      problems.push(`${what} ${JSON.stringify(value)} is not NAME=VALUE (NAME: letters, digits, _ . -, not starting with a digit)`);
      continue;
    }
    out[name] = value.slice(eq + 1);
  }
  if (problems.length > 0) throw new CommandError(problems.join('\n'));
  return out;
}

/**
 * Reads a secrets file: one `name=value` a line; blank lines and `#` comments are skipped;
 * a value may be quoted with single or double quotes.
 */
export function readSecretsFile(file: string): Record<string, string> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : code === 'EISDIR' ? 'it is a directory' : String(error);
    throw new CommandError(`cannot read the secrets file ${file}: ${why}`);
  }
  const out: Record<string, string> = {};
  const problems: string[] = [];
  text.split(/\r?\n/).forEach((raw, index) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const eq = line.indexOf('=');
    if (eq <= 0) {
      problems.push(`${file}:${index + 1}: expected name=value`);
      return;
    }
    let value = line.slice(eq + 1).trim();
    if (value.length >= 2 && (value[0] === '"' || value[0] === "'") && value.at(-1) === value[0]) value = value.slice(1, -1);
    out[line.slice(0, eq).trim()] = value;
  });
  if (problems.length > 0) throw new CommandError(`the secrets file has lines that are not name=value:\n${problems.join('\n')}`);
  return out;
}
