import { describe, expect, it } from 'vitest';
import { applyScript, emptyContainer } from '../src/index.ts';
import { buildScript, generateScript, goQuote, SCRIPT_COMMAND } from '../src/script.ts';

// The script Vela's generateScriptPosix builds for ["echo ${FOO}", "echo bar"]
// (go-vela/server compiler/types/pipeline/container.go setupScript + traceScript).
const VELA_SCRIPT = [
  '',
  'cat <<EOF > $HOME/.netrc',
  'machine $VELA_NETRC_MACHINE',
  'login $VELA_NETRC_USERNAME',
  'password $VELA_NETRC_PASSWORD',
  'EOF',
  'chmod 0600 $HOME/.netrc',
  'unset VELA_NETRC_MACHINE',
  'unset VELA_NETRC_USERNAME',
  'unset VELA_NETRC_PASSWORD',
  'unset VELA_BUILD_SCRIPT',
  '',
  'echo $ "echo \\${FOO}"',
  'echo ${FOO}',
  '',
  'echo $ "echo bar"',
  'echo bar',
  '',
  '',
].join('\n');

describe('generateScript', () => {
  it('base64-encodes exactly the script Vela builds', () => {
    const encoded = generateScript(['echo ${FOO}', 'echo bar']);
    expect(Buffer.from(encoded, 'base64').toString('utf8')).toBe(VELA_SCRIPT);
    expect(buildScript(['echo ${FOO}', 'echo bar'])).toBe(VELA_SCRIPT);
  });

  it('quotes the trace line as Go %q with $ escaped', () => {
    const script = buildScript(['echo "hi" \\ $HOME\tx', 'printf "a\\nb"']);
    expect(script).toContain('\necho $ "echo \\"hi\\" \\\\ \\$HOME\\tx"\necho "hi" \\ $HOME\tx\n');
    expect(script).toContain('\necho $ "printf \\"a\\\\nb\\""\nprintf "a\\nb"\n');
  });

  it('keeps a multi-line command and escapes its newlines in the trace', () => {
    const script = buildScript(['if true; then\n  echo yes\nfi']);
    expect(script).toContain('echo $ "if true; then\\n  echo yes\\nfi"\nif true; then\n  echo yes\nfi\n');
  });
});

describe('goQuote', () => {
  it.each([
    ['plain', '"plain"'],
    ['tab\there', '"tab\\there"'],
    ['bell\x07', '"bell\\a"'],
    ['nul\x00', '"nul\\x00"'],
    ['del\x7f', '"del\\x7f"'],
    ['héllo ☺', '"héllo ☺"'],
    ['zero\u200bwidth', '"zero\\u200bwidth"'],
    ['c1\u0085', '"c1\\u0085"'],
  ])('%j', (input, want) => {
    expect(goQuote(input)).toBe(want);
  });
});

describe('applyScript (Vela Container.Script)', () => {
  it('turns commands into the scripted entrypoint', () => {
    const c = applyScript(emptyContainer({ name: 'x', commands: ['echo hi'], environment: { A: 'b' } }));
    expect(c.entrypoint).toEqual(['/bin/sh', '-c']);
    expect(c.commands).toEqual([SCRIPT_COMMAND]);
    expect(c.commands[0]).toBe('echo $VELA_BUILD_SCRIPT | base64 -d | /bin/sh -e');
    expect(c.environment).toEqual({ A: 'b', VELA_BUILD_SCRIPT: generateScript(['echo hi']), HOME: '/root', SHELL: '/bin/sh' });
  });

  it('derives HOME from user unless the environment sets it', () => {
    expect(applyScript(emptyContainer({ commands: ['x'], user: 'builder' })).environment['HOME']).toBe('/home/builder');
    expect(applyScript(emptyContainer({ commands: ['x'], user: 'builder', environment: { HOME: '/h' } })).environment['HOME']).toBe('/h');
  });

  it('leaves a container without commands alone', () => {
    const c = emptyContainer({ image: 'plugin' });
    expect(applyScript(c)).toBe(c);
  });
});
