/**
 * `--config FILE`: settings in a YAML file, as Buildkite's agent takes a config file (its
 * `--config` / `BUILDKITE_AGENT_CONFIG`): one key per setting, under any of its spellings
 * (`build-limit: 2`, `build.limit: 2`), or nested by Vela's dots (`build: { limit: 2 }`).
 * Flags and environment variables win over it; it wins over `/vela/...` files and defaults.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { settingBySpelling } from './resolve.ts';

/** A config file that cannot be used: the message says which file and why. */
export class ConfigFileError extends Error {
  override readonly name = 'ConfigFileError';
}

const isMap = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Flattens nested maps into dotted keys, except where the key so far already names a setting. */
function flatten(values: Record<string, unknown>, prefix = '', out: Record<string, unknown> = {}): Record<string, unknown> {
  for (const [key, value] of Object.entries(values)) {
    const full = prefix ? `${prefix}.${key}` : key;
    if (isMap(value) && settingBySpelling(full) === undefined) flatten(value, full, out);
    else out[full] = value;
  }
  return out;
}

/**
 * Reads a config file (relative paths against `cwd`). Rejects with a {@link ConfigFileError} when
 * it cannot be read or is not a YAML map. The YAML parser is loaded only here: a worker started
 * without a config file never loads it (~2.5 MB).
 */
export async function readConfigFile(file: string, cwd: string): Promise<{ file: string; values: Record<string, unknown> }> {
  const full = path.resolve(cwd, file);
  let text: string;
  try {
    text = readFileSync(full, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : code === 'EISDIR' ? 'it is a directory' : String(e);
    throw new ConfigFileError(`cannot read the config file ${full}: ${why}`);
  }
  const { parse } = await import('yaml');
  let data: unknown;
  try {
    data = parse(text, { prettyErrors: true });
  } catch (e) {
    throw new ConfigFileError(`the config file ${full} is not valid YAML: ${(e as Error).message.split('\n')[0]!}`);
  }
  if (data === null || data === undefined) return { file: full, values: {} };
  if (!isMap(data))
    throw new ConfigFileError(`the config file ${full} must be a map of settings (build-limit: 2), not ${Array.isArray(data) ? 'a list' : typeof data}`);
  return { file: full, values: flatten(data) };
}
