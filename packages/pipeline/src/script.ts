/**
 * Vela's build script (`Container.Script` and `generateScriptPosix`): a step's `commands` become
 * one POSIX shell script, base64 encoded into `VELA_BUILD_SCRIPT`.
 */
import type { Container } from './model.ts';

/** The shell Vela runs scripts with (`constants.DefaultShell`). */
const DEFAULT_SHELL = '/bin/sh';
/** HOME of a step without `user` (`constants.DefaultHomeDir`). */
const DEFAULT_HOME = '/root';
/** The command a scripted container runs: decodes `VELA_BUILD_SCRIPT` and runs it with `sh -e`. */
export const SCRIPT_COMMAND = 'echo $VELA_BUILD_SCRIPT | base64 -d | /bin/sh -e';

const SETUP_PREFIX = `
cat <<EOF > $HOME/.netrc
machine $VELA_NETRC_MACHINE
login $VELA_NETRC_USERNAME
password $VELA_NETRC_PASSWORD
EOF
chmod 0600 $HOME/.netrc
unset VELA_NETRC_MACHINE
unset VELA_NETRC_USERNAME
unset VELA_NETRC_PASSWORD
unset VELA_BUILD_SCRIPT
`;

const PRINTABLE = /^[\p{L}\p{M}\p{N}\p{P}\p{S} ]$/u;

/**
 * A string quoted as Go's `strconv.Quote` (`fmt.Sprintf("%q")`) quotes it: double quotes,
 * `\"` `\\` `\n` `\t` …, `\xNN` for other control bytes, `\uNNNN`/`\UNNNNNNNN` for non-printable
 * characters; printable Unicode is kept.
 *
 * Gotcha: Go decides printability with its own Unicode tables; this uses the JavaScript engine's
 * (`\p{L}\p{M}\p{N}\p{P}\p{S}` and ASCII space), which can differ for newly assigned characters.
 */
export function goQuote(value: string): string {
  let out = '"';
  for (const ch of value) {
    const cp = ch.codePointAt(0) ?? 0;
    switch (ch) {
      case '"':
        out += '\\"';
        continue;
      case '\\':
        out += '\\\\';
        continue;
      case '\x07':
        out += '\\a';
        continue;
      case '\b':
        out += '\\b';
        continue;
      case '\f':
        out += '\\f';
        continue;
      case '\n':
        out += '\\n';
        continue;
      case '\r':
        out += '\\r';
        continue;
      case '\t':
        out += '\\t';
        continue;
      case '\v':
        out += '\\v';
        continue;
    }
    if (cp >= 0xd800 && cp <= 0xdfff) {
      // A lone surrogate is not valid UTF-8: Go would see U+FFFD.
      out += '\\ufffd';
    } else if (PRINTABLE.test(ch)) {
      out += ch;
    } else if (cp < 0x20 || cp === 0x7f) {
      out += `\\x${cp.toString(16).padStart(2, '0')}`;
    } else if (cp < 0x10000) {
      out += `\\u${cp.toString(16).padStart(4, '0')}`;
    } else {
      out += `\\U${cp.toString(16).padStart(8, '0')}`;
    }
  }
  return `${out}"`;
}

/**
 * The plain-text script Vela builds from commands: the `.netrc` setup, then for each command an
 * `echo $ <command, Go-quoted, with $ escaped>` trace line and the command itself.
 */
export function buildScript(commands: readonly string[]): string {
  let body = '';
  for (const command of commands) {
    const escaped = goQuote(command).replaceAll('$', '\\$');
    body += `\necho $ ${escaped}\n${command}\n`;
  }
  return `${SETUP_PREFIX}${body}\n`;
}

/**
 * The base64 value of `VELA_BUILD_SCRIPT` for `commands`, byte for byte what Vela produces
 * (`generateScriptPosix`).
 */
export function generateScript(commands: readonly string[]): string {
  return Buffer.from(buildScript(commands), 'utf8').toString('base64');
}

/**
 * A copy of `container` turned into a scripted container, as Vela's `Container.Script` does
 * (the worker calls it before creating a step): entrypoint `/bin/sh -c`, command
 * {@link SCRIPT_COMMAND}, environment `VELA_BUILD_SCRIPT`, `HOME` (`/root`, or `/home/<user>` when
 * `user` is set, unless the environment already has `HOME`) and `SHELL=/bin/sh`.
 *
 * A container without commands is returned unchanged (same object).
 */
export function applyScript(container: Container): Container {
  if (container.commands.length === 0) return container;
  let home = DEFAULT_HOME;
  if (container.user !== '') home = `/home/${container.user}`;
  const override = container.environment['HOME'];
  if (override !== undefined) home = override;
  return {
    ...container,
    entrypoint: [DEFAULT_SHELL, '-c'],
    commands: [SCRIPT_COMMAND],
    environment: {
      ...container.environment,
      VELA_BUILD_SCRIPT: generateScript(container.commands),
      HOME: home,
      SHELL: DEFAULT_SHELL,
    },
  };
}
