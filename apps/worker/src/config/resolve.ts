/**
 * Reads the settings of the table from their sources, in go-vela/worker's precedence with Berth's
 * config file slotted in: flag > environment (a `.env` file fills only variables not set) >
 * `--config` file > `/vela/...` file fallback > default. Every value is parsed and checked, and
 * every problem is collected with where the value came from.
 */
import { formatGoDuration } from '@berth/context';
import { type ConfigCommand, type SettingName, type SettingSpec, SETTINGS, defaultOf, envOf, settingLabel, settingsOf, spellingsOf } from './table.ts';
import { PARSERS, type ValueTypes } from './values.ts';

/** One problem found in the configuration, naming where the value came from. */
export interface ConfigIssue {
  /** The setting, or `config` for a problem of a source as a whole (an unreadable file). */
  setting: SettingName | 'config';
  /** `flag --build-limit`, `env VELA_BUILD_LIMIT`, `file /vela/queue/addr`, `config berth.yml`, `default`. */
  source: string;
  message: string;
}

/** The configuration is invalid: `issues` lists every problem, and so does the message. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly issues: ConfigIssue[];
  constructor(issues: ConfigIssue[], command: ConfigCommand = 'start') {
    super(
      `invalid configuration for berth ${command} (${issues.length} problem${issues.length === 1 ? '' : 's'}):\n` +
        issues.map((i) => `  - ${i.setting === 'config' ? i.source : `${settingLabel(i.setting)} (${i.source})`}: ${i.message}`).join('\n'),
    );
    this.issues = issues;
  }
}

/** Where raw values come from. */
export interface ConfigSources {
  /** Flag values, keyed by setting name or any of its spellings (`build.limit`, `buildLimit`, `build-limit`). */
  flags?: Record<string, unknown>;
  /** The process environment. */
  env?: Record<string, string | undefined>;
  /** Variables of a `.env` file: used only where the environment has none (godotenv's Load). */
  dotenv?: { file: string; values: Record<string, string> };
  /** The `--config` file's values, keyed by any spelling of a setting. */
  configFile?: { file: string; values: Record<string, unknown> };
  /**
   * Reads a `/vela/...` file fallback: its text, or undefined when it does not exist; throws on
   * other errors. Default: no file is read.
   */
  readFile?: (path: string) => string | undefined;
}

/** The parsed value of each setting, by name. */
export type SettingValues = { [K in SettingName]?: ValueTypes[(typeof SETTINGS)[K]['type']] };

/** What {@link resolveSettings} found. */
export interface Resolved {
  values: SettingValues;
  /** Where each value came from (`default` included). */
  sourceOf: Partial<Record<SettingName, string>>;
  issues: ConfigIssue[];
}

let spellingIndex: Map<string, SettingName> | undefined;

/** The setting a flag or config-file key names, in any of its spellings; undefined when none. */
export function settingBySpelling(key: string): SettingName | undefined {
  if (!spellingIndex) {
    spellingIndex = new Map();
    for (const name of Object.keys(SETTINGS) as SettingName[]) {
      spellingIndex.set(name, name);
      for (const s of spellingsOf(name)) spellingIndex.set(s, name);
    }
  }
  return spellingIndex.get(key);
}

function orList(items: readonly string[]): string {
  return items.length === 1 ? items[0]! : `${items.slice(0, -1).join(', ')} or ${items.at(-1)!}`;
}

/** The table's own rules (allowed values, bounds, pattern) for a parsed value. */
function check(spec: SettingSpec, value: unknown): string | undefined {
  if (spec.oneOf && !spec.oneOf.includes(String(value))) {
    return spec.oneOf.length === 1
      ? `must be ${spec.oneOf[0]!} (the only one Berth supports), got ${JSON.stringify(value)}`
      : `must be ${orList(spec.oneOf)}, got ${JSON.stringify(value)}`;
  }
  if (typeof value === 'number') {
    const dur = spec.type === 'duration';
    if (spec.min !== undefined && value < spec.min)
      return dur ? (spec.min <= 1e-6 ? 'must be longer than 0' : `must be at least ${formatGoDuration(spec.min)}`) : `must be at least ${spec.min}`;
    if (spec.max !== undefined && value > spec.max) return `must be at most ${dur ? formatGoDuration(spec.max) : spec.max}`;
  }
  if (spec.pattern) {
    const [re, meaning] = spec.pattern;
    const bad = (Array.isArray(value) ? value.map(String) : typeof value === 'string' ? [value] : []).filter((v) => !re.test(v));
    if (bad.length > 0) return `${meaning}, got ${bad.map((v) => JSON.stringify(v)).join(', ')}`;
  }
  return undefined;
}

interface Raw {
  value: unknown;
  source: string;
}

function rawValue(
  name: SettingName,
  command: ConfigCommand,
  sources: ConfigSources,
  flags: Map<SettingName, Raw>,
  fromConfig: Map<SettingName, Raw>,
  issues: ConfigIssue[],
): Raw | undefined {
  const spec: SettingSpec = SETTINGS[name];
  const flag = flags.get(name);
  if (flag) return flag;
  for (const variable of envOf(name, command)) {
    const v = sources.env?.[variable];
    if (v !== undefined && v !== '') return { value: v, source: `env ${variable}` };
    const d = sources.dotenv?.values[variable];
    if (v === undefined && d !== undefined && d !== '') return { value: d, source: `env ${variable} from ${sources.dotenv!.file}` };
  }
  const configured = fromConfig.get(name);
  if (configured) return configured;
  if (spec.file && sources.readFile) {
    let text: string | undefined;
    try {
      text = sources.readFile(spec.file);
    } catch (e) {
      issues.push({
        setting: name,
        source: `file ${spec.file}`,
        message: `cannot read it: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}; fix its permissions or remove it`,
      });
      return undefined;
    }
    // Go reads the file verbatim (urfave/cli value_source.go fileValueSource); Berth trims the
    // newline an editor or `echo` leaves, which Go would choke on for numbers and durations.
    const trimmed = text?.trim();
    if (trimmed) return { value: spec.type === 'list' ? trimmed.split(/[,\n]/) : trimmed, source: `file ${spec.file}` };
  }
  return undefined;
}

/**
 * Reads, parses and checks every setting `command` uses. Never throws for bad input: problems are
 * in `issues`, and a setting with a problem has no value.
 */
export function resolveSettings(command: ConfigCommand, sources: ConfigSources): Resolved {
  const issues: ConfigIssue[] = [];
  const names = settingsOf(command);
  const flags = new Map<SettingName, Raw>();
  for (const [key, value] of Object.entries(sources.flags ?? {})) {
    const name = settingBySpelling(key);
    if (name === undefined || value === undefined || !names.includes(name)) continue;
    flags.set(name, { value, source: `flag --${SETTINGS[name].flag}` });
  }
  const fromConfig = new Map<SettingName, Raw>();
  if (sources.configFile) {
    const { file, values } = sources.configFile;
    for (const [key, value] of Object.entries(values)) {
      const name = settingBySpelling(key);
      if (name === undefined || !names.includes(name)) {
        issues.push({
          setting: 'config',
          source: `config ${file}`,
          message: `${JSON.stringify(key)} is not a setting of berth ${command}; \`berth ${command} --help\` lists them`,
        });
        continue;
      }
      if (value === null || value === undefined) continue;
      fromConfig.set(name, { value, source: `config ${file}` });
    }
  }
  const values: Record<string, unknown> = {};
  const sourceOf: Partial<Record<SettingName, string>> = {};
  for (const name of names) {
    const spec: SettingSpec = SETTINGS[name];
    const raw = rawValue(name, command, sources, flags, fromConfig, issues);
    const def = defaultOf(name, command);
    if (!raw && def === undefined) continue;
    const { value, source } = raw ?? { value: def, source: 'default' };
    sourceOf[name] = source;
    const parsed = (PARSERS[spec.type] as (raw: unknown) => { ok: boolean; value?: unknown; message?: string })(value);
    if (!parsed.ok) {
      issues.push({ setting: name, source, message: parsed.message! });
      continue;
    }
    const problem = check(command === 'exec' && spec.exec?.anyValue ? { ...spec, oneOf: undefined } : spec, parsed.value);
    if (problem) issues.push({ setting: name, source, message: problem });
    else values[name] = parsed.value;
  }
  return { values: values, sourceOf, issues };
}
