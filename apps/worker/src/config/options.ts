/**
 * The settings table as command-line options: commander options in help groups (unsupported
 * settings hidden), help wrapped at the terminal's width, and the spellings go-vela/worker's
 * urfave/cli parser accepts (`-build.limit=2`, `--checkIn 5m`) rewritten to the flag Berth shows.
 */
import { type Command, Help, Option } from 'commander';
import { type ConfigCommand, type SettingName, type SettingSpec, HELP_GROUPS, SETTINGS, defaultOf, envOf, settingsOf, spellingsOf } from './table.ts';
import type { ValueType } from './values.ts';

const PLACEHOLDER: Record<ValueType, string> = {
  string: '<value>',
  path: '<path>',
  int: '<n>',
  uint: '<n>',
  bool: '[bool]',
  duration: '<duration>',
  list: '<a,b,…>',
  pairs: '<key=value>',
  logLevel: '<level>',
  logFormat: '<format>',
  bytes: '<size>',
  cpus: '<cpus>',
  listen: '<host:port>',
};

/** The `--config` and `--check-config` options' help group. */
const META_GROUP = 'Configuration';

/** One setting's help line: what it is, its variables, its `/vela` file and its default. */
function describe(name: SettingName, command: ConfigCommand): string {
  const spec: SettingSpec = SETTINGS[name];
  const where = [`env ${envOf(name, command).join(', ')}`];
  // Only `berth start` reads the /vela files (a Vela worker's install); `exec` runs on a developer's machine.
  if (spec.file && command === 'start') where.push(`file ${spec.file}`);
  const def = defaultOf(name, command) ?? spec.defaultHelp;
  if (def !== undefined) where.push(`default ${def}`);
  return `${spec.help} (${where.join('; ')})`;
}

/**
 * Adds every setting `command` reads as an option of `cmd`, grouped by the table's help groups,
 * plus `--config <file>` and `--check-config`. Values arrive as text (lists as arrays); parse them
 * with resolveSettings, which accepts commander's `opts()` as its flags.
 */
export function addSettingOptions(cmd: Command, command: ConfigCommand): void {
  const names = settingsOf(command);
  for (const group of HELP_GROUPS) {
    for (const name of names.filter((n) => SETTINGS[n].group === group)) {
      const spec: SettingSpec = SETTINGS[name];
      const option = new Option(`${spec.short ? `-${spec.short}, ` : ''}--${spec.flag} ${PLACEHOLDER[spec.type]}`, describe(name, command)).helpGroup(
        `${group}:`,
      );
      if (spec.type === 'list' || spec.type === 'pairs') option.argParser((value: string, previous: string[] | undefined) => [...(previous ?? []), value]);
      if (spec.hidden) option.hideHelp();
      cmd.addOption(option);
    }
  }
  cmd.addOption(
    new Option(
      '--config <file>',
      'a YAML file of settings, keyed by flag name (build-limit: 2) or Vela name (build.limit: 2); flags and variables win over it (env BERTH_CONFIG)',
    ).helpGroup(`${META_GROUP}:`),
  );
  cmd.addOption(
    new Option('--check-config', 'print the resolved configuration, with where each value came from and secrets redacted, and exit').helpGroup(
      `${META_GROUP}:`,
    ),
  );
}

/**
 * Rewrites the flag spellings go-vela/worker accepts to the flags `cmd` declares: urfave/cli v3.8
 * (command_parse.go `parseFlags`) takes `-name` as well as `--name`, with the value as the next
 * argument or after `=`, and Vela's names are dotted or camelCase (`build.limit`, `checkIn`).
 * Tokens that are values of a preceding option, or after `--`, are left alone.
 */
export function normalizeArgs(cmd: Command, command: ConfigCommand, args: readonly string[]): string[] {
  const spelled = new Map<string, string>();
  for (const name of settingsOf(command)) for (const s of spellingsOf(name)) spelled.set(s, SETTINGS[name].flag);
  const takesValue = new Set<string>();
  for (const o of cmd.options) {
    if (!o.required) continue;
    if (o.long) takesValue.add(o.long);
    if (o.short) takesValue.add(o.short);
  }
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const token = args[i]!;
    if (token === '--') {
      out.push(...args.slice(i));
      break;
    }
    const m = /^(--?)([A-Za-z][\w.-]*)(=.*)?$/s.exec(token);
    const flag = m && (m[1] === '--' || m[2]!.length > 1) ? spelled.get(m[2]!) : undefined;
    const rewritten = flag ? `--${flag}${m![3] ?? ''}` : token;
    out.push(rewritten);
    const bare = rewritten.split('=')[0]!;
    if (!rewritten.includes('=') && takesValue.has(bare) && i + 1 < args.length) out.push(args[++i]!);
  }
  return out;
}

/**
 * Help that stays within `width` columns: when the option terms leave less than 40 columns for
 * descriptions, each description goes on its own lines under its term.
 */
export class WrappingHelp extends Help {
  override formatItem(term: string, termWidth: number, description: string, helper: Help): string {
    const width = this.helpWidth ?? 80;
    if (!description || width - termWidth - 4 >= 40) return super.formatItem(term, termWidth, description, helper);
    const body = helper.boxWrap(description, Math.max(40, width - 8));
    return `  ${term}\n${body.replace(/^/gm, '        ')}`;
  }
}
