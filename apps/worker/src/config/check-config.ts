/**
 * `--check-config`: the resolved configuration as a YAML config file, each value with where it
 * came from, secrets redacted. Feeding the output back with `--config` gives the same settings.
 */
import { formatGoDuration } from '@berth/context';
import type { SettingValues } from './resolve.ts';
import { type ConfigCommand, type SettingName, type SettingSpec, SETTINGS, settingsOf } from './table.ts';

/** What stands in for a secret's value. */
const REDACTED = '[redacted]';

function show(spec: SettingSpec, value: unknown): string {
  if (spec.secret) return JSON.stringify(REDACTED);
  if (spec.type === 'duration' && typeof value === 'number') return formatGoDuration(value);
  if (spec.type === 'listen' && typeof value === 'object' && value !== null) {
    const { host, port } = value as { host: string; port: number };
    return JSON.stringify(`${host.includes(':') ? `[${host}]` : host}:${port}`);
  }
  return JSON.stringify(value);
}

/** The text `--check-config` prints. */
export function formatResolvedConfig(command: ConfigCommand, values: SettingValues, sourceOf: Partial<Record<SettingName, string>>): string {
  const lines = [`# berth ${command}: resolved configuration (secrets redacted); usable as --config`];
  for (const name of settingsOf(command)) {
    const spec: SettingSpec = SETTINGS[name];
    const value: unknown = values[name];
    if (value === undefined) continue;
    lines.push(`${spec.flag}: ${show(spec, value)}  # ${sourceOf[name] ?? 'default'}`);
  }
  return `${lines.join('\n')}\n`;
}
