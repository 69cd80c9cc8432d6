import { describe, expect, it } from 'vitest';
import { ContainerFs, MemoryFs } from '../src/shell/fs.ts';
import { EMPTY_INPUT } from '../src/shell/io.ts';
import { parseScript, ShellSyntaxError } from '../src/shell/parse.ts';
import { formatPrintf } from '../src/shell/printf.ts';
import { Shell, type ShellHost } from '../src/shell/shell.ts';

/** Runs `script` in a fresh dummy shell; returns its combined output and status. */
async function run(script: string, env: Record<string, string> = {}): Promise<{ out: string; status: number; workspace: MemoryFs }> {
  let pid = 0;
  const kill = new AbortController();
  const workspace = new MemoryFs();
  const host: ShellHost = {
    signal: kill.signal,
    fs: new ContainerFs(new MemoryFs(), workspace, '/vela', () => undefined),
    uid: 0,
    gid: 0,
    hostname: 'test',
    nextPid: () => ++pid,
    killContainer: () => kill.abort(),
    connect: () => 'unknown-host',
    listen: () => () => undefined,
  };
  let out = '';
  const sink = { write: (d: Buffer | string) => ((out += d.toString()), Promise.resolve(true)) };
  const status = await new Shell(host, { env, cwd: '/' }).runScript(script, { stdin: EMPTY_INPUT, stdout: sink, stderr: sink });
  return { out, status, workspace };
}

describe('the dummy shell', () => {
  it.each([
    ['echo a; echo b', 'a\nb\n', 0],
    ['echo -n x; printf "%s-%d|" a 1 b 2', 'xa-1|b-2|', 0],
    ['if false; then echo no; elif true; then echo elif; else echo else; fi', 'elif\n', 0],
    ['i=0; while [ $i -lt 3 ]; do i=$((i+1)); done; echo $i', '3\n', 0],
    ['n=3; until [ $n -eq 0 ]; do printf $n; n=$((n - 1)); done', '321', 0],
    ['true && echo and; false || echo or; false && echo never', 'and\nor\n', 1],
    ['! false && echo negated', 'negated\n', 0],
    ['for x in "a b" c; do echo "[$x]"; done', '[a b]\n[c]\n', 0],
    ['v="one two"; for x in $v; do echo $x; done', 'one\ntwo\n', 0],
    ['echo \'$HOME\' "${UNSET:-fallback}" ${SET:+alt}', '$HOME fallback alt\n', 0],
    ['echo "$(echo inner; echo more)"', 'inner\nmore\n', 0],
    ["cat <<EOF\nx=$SET\nEOF\ncat <<'EOF'\nx=$SET\nEOF", 'x=1\nx=$SET\n', 0],
    ['echo err >&2; echo out 2>&1', 'err\nout\n', 0],
    ['yes ab | head -n 2; echo 1234567 | head -c 3', 'ab\nab\n123', 0],
    ['(exit 4); echo "status $?"', 'status 4\n', 0],
    ["sh -c 'exit 5'; echo $?", '5\n', 0],
    ['echo x | grep -q x && echo found', 'found\n', 0],
    ['nosuchcommand', 'sh: nosuchcommand: not found\n', 127],
    ['echo "unterminated', 'sh: syntax error: unterminated quoted string\n', 2],
  ])('%j prints %j and exits %i', async (script, out, status) => {
    const result = await run(script, { SET: '1' });
    expect(result.out).toBe(out);
    expect(result.status).toBe(status);
  });

  it('with set -e stops at the first failing command, but not in conditions or && / || lists', async () => {
    const result = await run('set -e\nif false; then :; fi\nfalse || true\nfalse && true\necho reached\nfalse\necho not-reached');
    expect(result).toMatchObject({ out: 'reached\n', status: 1 });
  });

  it('writes, appends and reads files of the workspace', async () => {
    const result = await run(
      'echo one > /vela/f\necho two >> /vela/f\ncd /vela && cat f\n[ -e /vela/g ] || echo no-g\nmkdir -p /vela/d/e && touch /vela/d/e/x && [ -d /vela/d ] && echo dir',
    );
    expect(result.out).toBe('one\ntwo\nno-g\ndir\n');
    expect(result.workspace.read('/vela/f')?.toString()).toBe('one\ntwo\n');
  });

  it('reports kill -9 of itself as status 137', async () => {
    expect(await run("sh -c 'kill -9 $$'; echo $?")).toMatchObject({ out: '137\n', status: 0 });
  });

  it('runs a script read from stdin, as Vela runs VELA_BUILD_SCRIPT', async () => {
    const script = Buffer.from('echo from-script\nexit 3\n').toString('base64');
    const result = await run('echo $S | base64 -d | /bin/sh -e', { S: script });
    expect(result).toMatchObject({ out: 'from-script\n', status: 3 });
  });

  it('parses nested compound commands and rejects broken ones', () => {
    expect(parseScript('for i in 1 2; do if [ $i = 1 ]; then { echo a; }; fi; done')).toHaveLength(1);
    expect(() => parseScript('if true; then echo x')).toThrow(ShellSyntaxError);
    expect(() => parseScript('echo ${bad substitution}')).toThrow(/bad substitution/);
  });

  it('formats printf like printf(1)', () => {
    expect(formatPrintf('%5s|%-3s|%03d|%x|%%|%b', ['ab', 'c', '7', '255', 'x\\ty'])).toBe('   ab|c  |007|ff|%|x\ty');
    expect(formatPrintf('%s\\n', ['a', 'b'])).toBe('a\nb\n');
  });
});
